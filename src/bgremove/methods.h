// The background-removal methods behind remove_background (qsmcore/bgremove.h), one file each:
// the inputs are already checked there (one grid, a mask with voxels inside, options in range).
#pragma once
#include "qsmcore/bgremove.h"

namespace qsmcore::bgremove {

BfrResult sharp(const Volume& field, const Volume& mask, const BfrOptions& o);
BfrResult vsharp(const Volume& field, const Volume& mask, const BfrOptions& o);
BfrResult resharp(const Volume& field, const Volume& mask, const BfrOptions& o);
BfrResult ismv(const Volume& field, const Volume& mask, const BfrOptions& o);
BfrResult pdf(const Volume& field, const Volume& mask, const Vec3& b0_dir, const BfrOptions& o);
BfrResult lbv(const Volume& field, const Volume& mask, const BfrOptions& o);

}  // namespace qsmcore::bgremove
