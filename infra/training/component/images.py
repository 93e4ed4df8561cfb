"""ContainerImages: images built from this repository with pulumi-docker-build and pushed to the stack's
ECR repositories, or prebuilt images named by digest; every workload refers to them by digest.

Each built image gets one tag, a hash of its build context (``infra/io/build_context.py``), so a changed
file gives a new tag in the immutable repositories and an unchanged tree never pushes the same tag twice.
ECR credentials come from ``GetAuthorizationToken`` at deploy time (valid 12 hours; the provider ignores
password changes in its diff). No registry build cache: the repositories' tags are immutable, and a cache
tag would have to be overwritten on every build.
https://www.pulumi.com/registry/packages/docker-build/api-docs/image/
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_docker_build as docker_build


@dataclass(frozen=True, kw_only=True)
class ImageBuildSpec:
    """One image to build: where it goes (``repository_url``), its tag and the build inputs (absolute
    paths of context and Dockerfile)."""

    repository_url: pulumi.Input[str]
    tag: str
    context: str
    dockerfile: str
    platform: str
    build_args: Mapping[str, str] = field(default_factory=dict)
    target: str | None = None


@dataclass(frozen=True, kw_only=True)
class ContainerImagesArgs:
    """``builds``: repository -> image to build; ``prebuilt``: repository -> image by digest (not built);
    ``registry_id``: the account whose ECR the builds push to; ``build_on_preview``: build during previews;
    ``push_after``: what every push waits for (the registry's replication setup: ECR replicates only
    images pushed after it exists)."""

    builds: Mapping[str, ImageBuildSpec] = field(default_factory=dict)
    prebuilt: Mapping[str, str] = field(default_factory=dict)
    registry_id: str = ""
    build_on_preview: bool = False
    push_after: Sequence[pulumi.Resource] = ()


class ContainerImages(pulumi.ComponentResource):
    """The stack's images; ``refs`` maps each repository to ``<repository>@sha256:<digest>``."""

    refs: dict[str, pulumi.Output[str]]

    def __init__(self, name: str, args: ContainerImagesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:images:ContainerImages", name, None, opts)
        self.images: dict[str, docker_build.Image] = {}
        self.refs = {repo: pulumi.Output.from_input(ref) for repo, ref in args.prebuilt.items()}
        if args.builds:
            token = aws.ecr.get_authorization_token_output(
                registry_id=args.registry_id, opts=pulumi.InvokeOutputOptions(parent=self)
            )
            for repo, spec in sorted(args.builds.items()):
                url = pulumi.Output.from_input(spec.repository_url)
                image = docker_build.Image(
                    f"{name}-{repo}",
                    tags=[url.apply(lambda u, t=spec.tag: f"{u}:{t}")],
                    context=docker_build.BuildContextArgs(location=spec.context),
                    dockerfile=docker_build.DockerfileArgs(location=spec.dockerfile),
                    build_args=dict(spec.build_args) or None,
                    target=spec.target,
                    platforms=[docker_build.Platform(spec.platform)],
                    push=True,
                    build_on_preview=args.build_on_preview,
                    registries=[
                        docker_build.RegistryArgs(
                            address=url.apply(lambda u: u.split("/", 1)[0]),
                            username=token.user_name,
                            password=pulumi.Output.secret(token.password),
                        )
                    ],
                    opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.push_after)),
                )
                self.images[repo] = image
                # By digest, never by tag: the workload runs exactly what was built.
                self.refs[repo] = pulumi.Output.concat(url, "@", image.digest)
        self.register_outputs({"refs": self.refs})
