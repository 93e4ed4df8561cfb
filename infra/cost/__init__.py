"""The cost model of a stack and its price table (`data/prices.yaml`)."""
