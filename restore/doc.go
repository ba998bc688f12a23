// Package restore recreates in a cluster what a folder of the mirror holds: the repository as a
// backup. It reads the files from a folder on disk or from a Git repository at a commit or as it
// stood at a time, decrypts the SOPS-encrypted Secrets with the age key the person gives, leaves
// out what the apiserver makes for itself and gitops-reverser's own configuration, and applies the
// rest with server-side apply as the person who runs it (their kubeconfig, their rights), in an
// order that works: CRDs first, waited for until Established, then namespaces, cluster-scoped
// objects, what workloads use, the workloads, the rest, and admission webhooks last.
//
// Nothing depends on file names: each file's own apiVersion, kind and metadata say what it is.
// Run twice, a restore changes nothing the second time.
package restore
