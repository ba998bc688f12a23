// Package install tests the shipped install paths (deploy/ and the Helm chart) against a real
// apiserver: the manifests must pass the apiserver's own validation, agree with each other and
// with the daemon's flags, and the daemon must do its whole job with exactly the RBAC they grant,
// and no more. It has no code of its own, only tests.
package install
