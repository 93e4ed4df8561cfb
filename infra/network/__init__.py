"""The VPC (subnets, NAT, endpoints, flow logs) and its CIDR layout, the zones a stack uses."""
