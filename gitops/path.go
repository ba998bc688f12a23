package gitops

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"strings"
)

// ClusterScoped is the folder name used instead of a namespace for cluster-scoped objects.
const ClusterScoped = "_cluster"

// Path is the versionless, kubectl-style file path of an object:
// {baseFolder}/{namespace | _cluster}/{resource}[.{group}]/{name}.yaml. The API version is not
// part of it, so a version bump never moves a file.
func Path(baseFolder, group, resource, namespace, name string) string {
	if namespace == "" {
		namespace = ClusterScoped
	}
	kind := resource
	if group != "" {
		kind = resource + "." + group
	}
	file := namespace + "/" + kind + "/" + name + ".yaml"
	base := strings.Trim(path.Clean("/"+baseFolder), "/")
	if base == "" {
		return file
	}
	return base + "/" + file
}

// WorkerKey is a stable short hash of a repository and branch, used as the clone's folder name.
func WorkerKey(repoURL, branch string) string {
	sum := sha256.Sum256([]byte(repoURL + "\x00" + branch))
	return hex.EncodeToString(sum[:8])
}
