"""Karpenter: its AWS side (controller role, interruption queue), the chart, NodePools and EC2NodeClasses."""
