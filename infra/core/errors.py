"""User-facing errors.

Every error a user can cause names the field, the bad value and the fix, in one line, so that the CLI can
print it without a traceback and tests can assert on it.
"""

from __future__ import annotations


class PlatformError(Exception):
    """Base class for errors caused by the user's input rather than by a bug."""

    exit_code = 1


class ConfigError(PlatformError):
    """A stack config value is invalid.

    ``field`` is a dotted path from the stack file (``aiplat:platform.node_pools.gpu.instance_type``),
    ``problem`` says what is wrong with the value, ``fix`` what to do about it and ``doc`` where the
    constraint is documented (an AWS or Kubernetes page), when it comes from outside this project;
    ``data`` names the AWS data a refusal on AWS facts was judged on, and its date (printed last).
    """

    exit_code = 2

    def __init__(
        self,
        field: str,
        problem: str,
        fix: str | None = None,
        *,
        source: str | None = None,
        doc: str | None = None,
        data: str | None = None,
    ):
        self.field = field
        self.problem = problem
        self.fix = fix
        self.source = source
        self.doc = doc
        self.data = data
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = f"{self.source}: " if self.source else ""
        fix = f"; fix: {self.fix}" if self.fix else ""
        doc = f" (see {self.doc})" if self.doc else ""
        data = f" [data: {self.data}]" if self.data else ""
        return f"{where}{self.field}: {self.problem}{fix}{doc}{data}"

    def with_source(self, source: str) -> ConfigError:
        """The same error, attributed to a stack file."""
        return ConfigError(self.field, self.problem, self.fix, source=source, doc=self.doc, data=self.data)


class ConfigErrors(PlatformError):
    """Several config errors found in one pass; each is still one line."""

    exit_code = 2

    def __init__(self, errors: list[ConfigError]):
        self.errors = errors
        super().__init__("\n".join(e.one_line() for e in errors))

    def with_source(self, source: str) -> ConfigErrors:
        """The same errors, each attributed to ``source`` unless it already names a file."""
        return ConfigErrors([e if e.source else e.with_source(source) for e in self.errors])


class DataSourceError(PlatformError):
    """A provider data call that the offline AWS data source cannot answer."""

    exit_code = 3


class ToolMissingError(PlatformError):
    """A program the command needs is not installed (the Pulumi CLI); the message says how to install it."""

    exit_code = 4


class PolicyViolationError(PlatformError):
    """A mandatory policy of the policy pack refused a stack's preview."""

    exit_code = 5


class ReviewInputError(PlatformError):
    """A saved plan, the policy pack or its config cannot be read (``aiplat review``)."""

    exit_code = 2


# One fix for every command that calls AWS without working credentials (preflight, addon-versions,
# check-storage, ...): https://boto3.amazonaws.com/v1/documentation/api/latest/guide/credentials.html
CREDENTIALS_FIX = (
    "sign in for the target account (aws sso login --profile NAME and export AWS_PROFILE=NAME, or set "
    "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN), then run the command again"
)
CREDENTIALS_DOC = "https://boto3.amazonaws.com/v1/documentation/api/latest/guide/credentials.html"


class AwsCredentialsError(PlatformError):
    """The AWS credentials are missing, expired or refused: nothing that calls AWS can run (exit 6,
    ``EXIT_AWS``). ``problem`` says which, in a few words with AWS's own error."""

    exit_code = 6

    def __init__(self, problem: str):
        self.problem = problem
        super().__init__(f"AWS credentials: {problem}; fix: {CREDENTIALS_FIX} (see {CREDENTIALS_DOC})")


class AwsUnreachableError(PlatformError):
    """An AWS API endpoint did not answer (no network, a proxy or firewall, a wrong endpoint URL): exit 6,
    ``EXIT_AWS``, as for credentials, since nothing that calls AWS can run either way."""

    exit_code = 6

    def __init__(self, endpoint: str, problem: str):
        self.endpoint = endpoint
        super().__init__(
            f"AWS did not answer at {endpoint} ({problem}); fix: check this machine's network, proxy "
            "(HTTPS_PROXY) and AWS_ENDPOINT_URL, or run from a host that reaches AWS (inside the VPC when "
            "only VPC endpoints are open), then run the command again"
        )


class AwsAccessDeniedError(PlatformError):
    """The credentials work but one AWS API call is denied (``AccessDenied``): exit 12; the message names
    the action to allow."""

    exit_code = 12

    def __init__(self, action: str, message: str):
        self.action = action
        super().__init__(
            f"AWS denied {action} ({message}); fix: allow {action} to your role (or sign in as the role the "
            "command documents: the deployer role, or a team member's role), then run the command again"
        )


# How to reach an EKS API server whose endpoint is private (prod): from inside the VPC.
# https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html#private-access
PRIVATE_ENDPOINT_FIX = (
    "the cluster's API endpoint answers only inside its VPC: connect the VPN, or run from the bastion, or "
    "open an SSM port forward (aws ssm start-session --target <bastion instance> --document-name "
    "AWS-StartPortForwardingSessionToRemoteHost --parameters host=<endpoint host>,portNumber=443,"
    "localPortNumber=8443) and pass "
    "--api-endpoint https://127.0.0.1:8443"
)


class ClusterAccessError(PlatformError):
    """The cluster's Kubernetes API did not answer, or refused the caller (exit 7)."""

    exit_code = 7


class UnknownTeamError(PlatformError):
    """A team the stack does not declare (exit 8)."""

    exit_code = 8


class NameTakenError(PlatformError):
    """A TrainJob of that name already exists in the team's namespace (HTTP 409; exit 9)."""

    exit_code = 9


class NoFlavorFitsError(PlatformError):
    """A job larger than any quota its team can be admitted under: Kueue would never admit it (exit 10)."""

    exit_code = 10


class JobNotFoundError(PlatformError):
    """No TrainJob of that name in the team's namespace (exit 11)."""

    exit_code = 11
