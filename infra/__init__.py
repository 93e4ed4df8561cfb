"""aiplat: Pulumi programs for a GPU training and inference platform on AWS."""
