"""The optional FSx for Lustre file system, its CSI driver and the volume the training pods mount."""
