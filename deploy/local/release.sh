#!/usr/bin/env bash
# Tag a release of pwevent (docs/releasing.md): checks that the working tree is clean (no change, no
# untracked file), that the version in pyproject.toml is the newest version in CHANGELOG.md (its first
# `## [X.Y.Z] - YYYY-MM-DD` heading after `## [Unreleased]`) and that the tag vX.Y.Z does not exist yet,
# then makes the annotated tag vX.Y.Z on HEAD with that CHANGELOG section as its message. It pushes
# nothing: it prints the push command.
#   deploy/local/release.sh           check, then tag
#   deploy/local/release.sh --check   check only (exit 0: ready to tag)
#   deploy/local/release.sh --help
# Exit 1 with the reason when a check fails. The tag's author is git's configured user.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
usage() { sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
die() { echo "release.sh: $*" >&2; exit 1; }

CHECK_ONLY=0
case "${1:-}" in
  "") ;;
  --check) CHECK_ONLY=1 ;;
  -h|--help) usage; exit 0 ;;
  *) usage >&2; exit 2 ;;
esac
cd "$REPO_ROOT"

dirty="$(git status --porcelain --untracked-files=normal)"
[[ -z "$dirty" ]] || die "the working tree is not clean (commit or remove these first):
$dirty"

version="$(sed -n 's/^version = "\([^"]*\)"$/\1/p' pyproject.toml | head -n 1)"
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] \
  || die "pyproject.toml: no semantic version in [project] version (found '$version')"
heading="$(grep -m 1 -E '^## \[[0-9]' CHANGELOG.md || true)"
logged="$(sed -n 's/^## \[\([^]]*\)\] - [0-9]\{4\}-[0-9]\{2\}-[0-9]\{2\}$/\1/p' <<<"$heading")"
[[ -n "$logged" ]] || die "CHANGELOG.md: no '## [X.Y.Z] - YYYY-MM-DD' heading (found '$heading')"
[[ "$logged" == "$version" ]] \
  || die "pyproject.toml says $version, CHANGELOG.md's newest release is $logged: bump one to the other"
tag="v$version"
! git rev-parse -q --verify "refs/tags/$tag" >/dev/null || die "tag $tag exists already"

if [[ $CHECK_ONLY -eq 1 ]]; then
  echo "release.sh: ready to tag $tag at $(git rev-parse --short HEAD)"
  exit 0
fi
# The tag's message: the version's CHANGELOG section, up to the next release heading or link list.
notes="$(awk -v head="$heading" '$0 == head {on = 1; print "pwevent " substr($0, 4); next}
                                  on && (/^## \[/ || /^\[[^]]*\]: /) {exit} on {print}' CHANGELOG.md)"
git tag --annotate --cleanup=verbatim --message "$notes" "$tag"
echo "release.sh: tagged $tag at $(git rev-parse --short HEAD); publish it with: git push origin $tag"
