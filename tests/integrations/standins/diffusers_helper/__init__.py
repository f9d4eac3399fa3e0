# SPDX-License-Identifier: MIT
"""Stand-in for FramePack's diffusers_helper package: only memory.py."""
