"""Reports: the figures a support lead reads (docs/reports.md defines each), computed from the desk's tables."""
