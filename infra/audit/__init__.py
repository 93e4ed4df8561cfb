"""The CloudTrail trail, its bucket and the audit alerts."""
