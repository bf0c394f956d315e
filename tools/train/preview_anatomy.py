"""Writes PNG slices of a few synth_anatomy samples (χ, field, TKD; three orthogonal planes) for
looking at the training data: /usr/bin/python3 tools/train/preview_anatomy.py OUT.png [N] [SEED]."""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import synth_anatomy as sa


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    rng = np.random.default_rng(int(sys.argv[3]) if len(sys.argv) > 3 else 7)
    canon = sa.load_canon()
    fig, ax = plt.subplots(n, 6, figsize=(15, 2.6 * n))
    for i in range(n):
        s = sa.make_sample(rng, canon)
        c = [d // 2 for d in s.chi.shape]
        planes = [(s.chi[:, :, c[2]], "χ axial"), (s.chi[:, c[1], :], "χ coronal"), (s.chi[c[0]], "χ sagittal"),
                  (s.field[:, :, c[2]], "field"), (s.tkd[:, :, c[2]], "TKD"), (s.mask[:, :, c[2]], "mask")]
        for j, (img, title) in enumerate(planes):
            lim = (-0.15, 0.15) if j != 3 else (-0.03, 0.03)
            if j == 5:
                lim = (0, 1)
            ax[i, j].imshow(img.T, origin="lower", cmap="gray", vmin=lim[0], vmax=lim[1])
            ax[i, j].set_title(f"{title} vox {np.round(s.voxel_mm, 2)}" if j == 0 else title, fontsize=7)
            ax[i, j].axis("off")
    fig.tight_layout()
    fig.savefig(out, dpi=70)


if __name__ == "__main__":
    main()
