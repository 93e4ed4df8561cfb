"""One inference name for every infer stack: Route 53 latency records over the regions' load balancers."""
