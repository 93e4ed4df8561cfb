"""Operations against a deployed (or about to be deployed) stack: read-only AWS checks through boto3."""
