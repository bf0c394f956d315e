#!/usr/bin/python3
"""Writes a multi-echo gradient-echo scan as DICOM, the way a Siemens scanner exports it.

Test data for qsmcore's DICOM input (src/scan/dicom.cpp, tests/scan/dicom_test.cpp): magnitude and
phase as two series (magnitude SERIES, phase SERIES+1), one instance per slice per echo, ImageType
ORIGINAL\\PRIMARY\\M\\ND and ORIGINAL\\PRIMARY\\P\\ND, pixels as 12-bit unsigned integers in
16-bit words, EchoTime in ms, EchoNumbers, MagneticFieldStrength, and the geometry
(ImagePositionPatient, ImageOrientationPatient, PixelSpacing, SliceThickness) of a given NIfTI
affine.

Inputs are .npy arrays shaped (X, Y, Z) or (X, Y, Z, echoes), indexed as nibabel indexes a NIfTI
image (x fastest on disk), e.g. `nibabel.load("magnitude.nii.gz").get_fdata()` from
`qsm phantom --raw --size 48 --out D`.
  magnitude: rounded to integers; must lie in [0, 4095] after rounding (scale it first).
  phase:     radians (any range; wrapped). Stored as Siemens does: the 12-bit integer
             round(phi * 2048/pi + 2048) mod 4096 with RescaleSlope 2 and RescaleIntercept -4096,
             so that the rescaled value v gives phi = v * pi/4096 (to within pi/4096).
The affine (--affine, 12 or 16 numbers, row-major) maps voxel indices to NIfTI's RAS+ scanner
coordinates in mm; DICOM's patient coordinates are LPS+, so x and y change sign. Its first two
columns must be orthogonal and its third along their cross product (either sign): DICOM slices
cannot be sheared.

Usage:
  make_dicom.py --out DIR [--magnitude M.npy] [--phase P.npy] --te 0.004,0.012,0.020 --b0 7
                [--affine a11,...] [--series 2] [--last-image-type ND] [--derived] [--phase-echoes N]
"""
import argparse
import datetime
import os
import sys

import numpy as np
import pydicom
from pydicom.dataset import FileDataset, FileMetaDataset
from pydicom.uid import ExplicitVRLittleEndian, generate_uid

MR_IMAGE_STORAGE = "1.2.840.10008.5.1.4.1.1.4"
GYROMAGNETIC_MHZ_PER_T = 42.577478518  # proton gamma / 2 pi (CODATA 2018)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="folder for the .dcm files (created if missing)")
    p.add_argument("--magnitude", help=".npy magnitude, (X,Y,Z[,E]), integers 0..4095 after rounding")
    p.add_argument("--phase", help=".npy phase in radians, (X,Y,Z[,E])")
    p.add_argument("--te", required=True, help="echo times in seconds, comma-separated, one per echo")
    p.add_argument("--b0", type=float, required=True, help="field strength in T")
    p.add_argument("--affine", default="", help="12 or 16 numbers, row-major (default: 1 mm, identity)")
    p.add_argument("--series", type=int, default=2, help="magnitude SeriesNumber; the phase gets +1")
    p.add_argument("--last-image-type", default="ND",
                   help="the last ImageType value: ND (no distortion correction) or e.g. DIS2D")
    p.add_argument("--derived", action="store_true",
                   help="ImageType DERIVED\\PRIMARY\\...: a series computed on the scanner (e.g. SWI)")
    p.add_argument("--phase-echoes", type=int, default=0,
                   help="write only the first N echoes of the phase (a series cut short)")
    p.add_argument("--description", default="gre_qsm", help="SeriesDescription and ProtocolName")
    p.add_argument("--study-seed", default="qsmcore-phantom", help="seeds the study's UIDs")
    return p.parse_args(argv)


def fail(message):
    sys.exit("make_dicom.py: " + message)


def read_array(path, what):
    a = np.load(path)
    if a.ndim == 3:
        a = a[..., np.newaxis]
    if a.ndim != 4:
        fail(f"{path}: the {what} must be shaped (X, Y, Z) or (X, Y, Z, echoes), not {a.shape}")
    if not np.all(np.isfinite(a)):
        fail(f"{path}: the {what} holds NaN or Inf")
    return a.astype(np.float64)


def parse_affine(text):
    if not text:
        return np.eye(4)
    v = [float(x) for x in text.split(",")]
    if len(v) not in (12, 16):
        fail(f"--affine takes 12 or 16 numbers, not {len(v)}")
    a = np.eye(4)
    a[:3, :] = np.array(v[:12]).reshape(3, 4)
    return a


class Geometry:
    """DICOM's per-slice geometry from a NIfTI affine (RAS+) on a grid of nz slices."""

    def __init__(self, affine):
        to_lps = np.diag([-1.0, -1.0, 1.0])
        cols = [to_lps @ affine[:3, c] for c in range(3)]
        self.spacing = [float(np.linalg.norm(c)) for c in cols]
        if min(self.spacing) <= 0:
            fail("the affine has a zero column")
        u = [c / s for c, s in zip(cols, self.spacing)]
        normal = np.cross(u[0], u[1])
        if abs(np.dot(u[0], u[1])) > 1e-6 or np.linalg.norm(np.cross(normal, u[2])) > 1e-6:
            fail("the affine is sheared: DICOM needs orthogonal axes (column 3 along column 1 x column 2)")
        self.row_dir, self.col_dir, self.slice_dir = u
        self.origin = to_lps @ affine[:3, 3]
        self.step = cols[2]

    def position(self, k):
        return self.origin + k * self.step

    def slice_location(self, k):
        # Siemens writes the position along the slice normal.
        return float(np.dot(self.position(k), np.cross(self.row_dir, self.col_dir)))


def ds_number(x):
    """A decimal string DICOM accepts (at most 16 characters)."""
    s = f"{x:.10g}"
    return s if len(s) <= 16 else f"{x:.6e}"


def uid(*parts):
    return generate_uid(entropy_srcs=[str(p) for p in parts])


def base_dataset(path, sop_uid):
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = MR_IMAGE_STORAGE
    meta.MediaStorageSOPInstanceUID = sop_uid
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    meta.ImplementationClassUID = pydicom.uid.PYDICOM_IMPLEMENTATION_UID
    ds = FileDataset(path, {}, file_meta=meta, preamble=b"\0" * 128)
    ds.is_little_endian = True
    ds.is_implicit_VR = False
    ds.SOPClassUID = MR_IMAGE_STORAGE
    ds.SOPInstanceUID = sop_uid
    return ds


def set_study(ds, args):
    ds.StudyInstanceUID = uid(args.study_seed, "study")
    ds.FrameOfReferenceUID = uid(args.study_seed, "frame")
    ds.PatientName = "Phantom^Head"
    ds.PatientID = "qsmphantom"
    ds.PatientSex = "O"
    ds.PatientBirthDate = ""
    ds.StudyDate = ds.SeriesDate = ds.AcquisitionDate = ds.ContentDate = "20240101"
    ds.StudyTime = "120000.000000"
    ds.StudyID = "1"
    ds.AccessionNumber = ""
    ds.ReferringPhysicianName = ""


def set_sequence(ds, args, n_echoes):
    ds.Modality = "MR"
    ds.Manufacturer = "SIEMENS"
    ds.ManufacturerModelName = "qsmcore make_dicom"
    ds.MagneticFieldStrength = ds_number(args.b0)
    ds.ImagingFrequency = ds_number(GYROMAGNETIC_MHZ_PER_T * args.b0)
    ds.ImagedNucleus = "1H"
    ds.ScanningSequence = "GR"
    ds.SequenceVariant = "SP"
    ds.ScanOptions = ""
    ds.MRAcquisitionType = "3D"
    ds.SequenceName = "*fl3d" + str(n_echoes)
    ds.RepetitionTime = ds_number(max(args.te_s) * 1000.0 + 10.0)
    ds.FlipAngle = "15"
    ds.EchoTrainLength = n_echoes
    ds.AcquisitionNumber = 1
    ds.SeriesDescription = ds.ProtocolName = args.description
    ds.BodyPartExamined = "BRAIN"
    ds.PatientPosition = "HFS"


def set_pixels(ds, pixels, phase):
    ds.Rows, ds.Columns = pixels.shape
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.BitsAllocated = 16
    ds.BitsStored = 12
    ds.HighBit = 11
    ds.PixelRepresentation = 0
    if phase:
        ds.RescaleSlope = "2"
        ds.RescaleIntercept = "-4096"
        ds.RescaleType = "US"
    ds.PixelData = np.ascontiguousarray(pixels, dtype="<u2").tobytes()


def write_slice(args, geom, series, part, e, k, pixels, n_echoes, n_slices):
    """One instance: slice k of echo e of one series; pixels is (Rows = Y, Columns = X)."""
    instance = e * n_slices + k + 1
    name = f"MR.{series:04d}.{instance:05d}.dcm"
    path = os.path.join(args.out, name)
    ds = base_dataset(path, uid(args.study_seed, series, instance, "sop"))
    set_study(ds, args)
    set_sequence(ds, args, n_echoes)
    ds.SeriesInstanceUID = uid(args.study_seed, series, "series")
    ds.SeriesNumber = series
    ds.InstanceNumber = instance
    first = "DERIVED" if args.derived else "ORIGINAL"
    ds.ImageType = [first, "PRIMARY", "P" if part == "phase" else "M", args.last_image_type]
    ds.SeriesTime = ds.AcquisitionTime = ds.ContentTime = "120100.000000"
    ds.EchoTime = ds_number(args.te_s[e] * 1000.0)
    ds.EchoNumbers = e + 1
    ds.ImagePositionPatient = [ds_number(x) for x in geom.position(k)]
    ds.ImageOrientationPatient = [ds_number(x) for x in (*geom.row_dir, *geom.col_dir)]
    # PixelSpacing is (between rows, between columns): rows step along voxel y, columns along x.
    ds.PixelSpacing = [ds_number(geom.spacing[1]), ds_number(geom.spacing[0])]
    ds.SliceThickness = ds.SpacingBetweenSlices = ds_number(geom.spacing[2])
    ds.SliceLocation = ds_number(geom.slice_location(k))
    set_pixels(ds, pixels, part == "phase")
    ds.save_as(path, write_like_original=False)


def stored_values(a, part, path):
    if part == "phase":
        return np.mod(np.rint(a * (2048.0 / np.pi) + 2048.0), 4096.0).astype(np.uint16)
    r = np.rint(a)
    if r.min() < 0 or r.max() > 4095:
        fail(f"{path}: the magnitude spans [{a.min():g}, {a.max():g}]; scale it into [0, 4095] (12 bits)")
    return r.astype(np.uint16)


def write_series(args, geom, part, path, series, n_echoes):
    a = read_array(path, part)
    if a.shape[3] > len(args.te_s):
        fail(f"{path}: {a.shape[3]} echoes but --te gives {len(args.te_s)} echo time(s)")
    if n_echoes > 0:
        a = a[..., :n_echoes]
    stored = stored_values(a, part, path)
    nz, ne = stored.shape[2], stored.shape[3]
    for e in range(ne):
        for k in range(nz):
            write_slice(args, geom, series, part, e, k, stored[:, :, k, e].T, ne, nz)


def main(argv):
    args = parse_args(argv)
    if not args.magnitude and not args.phase:
        fail("give --magnitude, --phase or both")
    args.te_s = [float(t) for t in args.te.split(",")]
    if any(not (0 < t < 1) for t in args.te_s):
        fail("--te takes echo times in seconds")
    os.makedirs(args.out, exist_ok=True)
    geom = Geometry(parse_affine(args.affine))
    if args.magnitude:
        write_series(args, geom, "magnitude", args.magnitude, args.series, 0)
    if args.phase:
        write_series(args, geom, "phase", args.phase, args.series + 1, args.phase_echoes)


if __name__ == "__main__":
    main(sys.argv[1:])
