"""Independent re-computations of tracelens figures from raw trace events (json/gzip only, no tracelens import)."""
