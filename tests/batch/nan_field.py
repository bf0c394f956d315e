"""Writes a copy of a NIfTI volume with one voxel set to NaN: the corrupt input of the batch tests
(its header is fine, so only the run finds it). Usage: nan_field.py IN.nii.gz OUT.nii.gz I J K"""
import sys

import nibabel as nib
import numpy as np

src, dst, ijk = sys.argv[1], sys.argv[2], tuple(int(v) for v in sys.argv[3:6])
img = nib.load(src)
data = np.asarray(img.dataobj, dtype=np.float32).copy()
data[ijk] = np.nan
nib.save(nib.Nifti1Image(data, img.affine, img.header), dst)
