// Package sops writes and reads SOPS documents for age recipients: what the mirror writes for
// Secrets, readable by the sops CLI.
//
// The format follows sops 3.x for YAML files: every leaf value a rule selects is replaced by
// ENC[AES256_GCM,data:…,iv:…,tag:…,type:…], encrypted with AES-256-GCM under one random 32-byte
// data key (a random 32-byte IV per value, the value's path of mapping keys joined with ':' plus a
// trailing ':' as additional data). A SHA-512 MAC over every non-null leaf value in document
// order (encrypted or not) is stored encrypted under the data key with the lastmodified time as
// additional data. The data key is wrapped for each age recipient in the top-level `sops`
// mapping. Comments are not kept, and a document is one YAML mapping.
//
// It is written with filippo.io/age and the standard library alone, so that the mirror does not
// link the sops module and its cloud SDKs.
package sops

// EncryptedRegex is the rule of which top-level keys are encrypted (the Flux convention).
//
// As in sops, a value is encrypted when any key on its path matches, so a key named data or
// stringData deeper in the document is encrypted as well.
const EncryptedRegex = "^(data|stringData)$"

// formatVersion is written as the `version` of the metadata: the sops release whose format this
// package follows (sops parses it as a semantic version).
const formatVersion = "3.13.3"

// metadataKey is the top-level key that holds the SOPS metadata.
const metadataKey = "sops"
