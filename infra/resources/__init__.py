"""What every component shares on the Pulumi side: resource options, the Helm release, IRSA roles."""
