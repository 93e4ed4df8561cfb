"""Jobs: what ``aiplat train submit/list/logs/cancel`` sends to and reads from the cluster."""
