"""Vendor specializations: `_<vendor>/ops` functions replace the generic ops of the same name."""
