"""Small helpers shared by the package's modules."""

from __future__ import annotations

import math
import re
from typing import Optional, Union

from . import _qsmcore

MemBudget = Optional[Union[int, str]]

# The units of the CLI's --mem-budget (src/memory/byte_size.cpp): SI with B, binary with iB or
# a bare K/M/G/T.
_UNITS = {"": 1, "B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
          "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4,
          "K": 1024, "k": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def parse_mem_budget(value: MemBudget) -> int:
    """None -> the automatic budget; "none" or 0 -> no budget; an int or a size string -> bytes."""
    if value is None:
        return _qsmcore.AUTO_MEM_BUDGET
    if isinstance(value, bool):
        raise TypeError("mem_budget: expected bytes, a size such as '2GiB', 'none' or None")
    if isinstance(value, int):
        if value < 0:
            raise _qsmcore.InvalidInputError(f"mem_budget: {value} is negative")
        return value
    if isinstance(value, str):
        if value == "none":
            return 0
        m = re.fullmatch(r"([0-9.]+) *([A-Za-z]*)", value)
        if not m or m.group(2) not in _UNITS:
            raise _qsmcore.InvalidInputError(
                f"mem_budget: '{value}' is not a byte size (write e.g. 2GiB, 500MB, 1048576 or 'none')")
        return int(math.ceil(float(m.group(1)) * _UNITS[m.group(2)]))
    raise TypeError("mem_budget: expected bytes, a size such as '2GiB', 'none' or None")
