"""Model files: :mod:`.persistence` (save and load an estimator) over :mod:`.archive`
(the zip archive sealed by a checksum)."""
