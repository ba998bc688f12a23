package crds

import (
	"path"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group and Version of every kind in this package.
const (
	Group   = "configbutler.ai"
	Version = "v1alpha1"
)

// GroupVersion is configbutler.ai/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// Kind names, as they appear in apiVersion/kind.
const (
	KindGitRepoConfig    = "GitRepoConfig"
	KindGitDestination   = "GitDestination"
	KindWatchRule        = "WatchRule"
	KindClusterWatchRule = "ClusterWatchRule"
)

// Resources for the dynamic client.
var (
	GitRepoConfigs    = GroupVersion.WithResource("gitrepoconfigs")
	GitDestinations   = GroupVersion.WithResource("gitdestinations")
	WatchRules        = GroupVersion.WithResource("watchrules")
	ClusterWatchRules = GroupVersion.WithResource("clusterwatchrules")
)

// ConditionReady is the condition every kind reports; the Ready printer column shows it.
const ConditionReady = "Ready"

// ReasonReferenceNotAllowed is the Ready reason of a GitDestination or WatchRule whose reference
// into another namespace that namespace's object does not admit (spec.accessPolicy,
// --cross-namespace-refs): it writes nothing, clones nothing and uses no credential.
const ReasonReferenceNotAllowed = "ReferenceNotAllowed"

// Status is the status shared by every kind: written only through the status subresource.
type Status struct {
	// Conditions is a map keyed by Type (x-kubernetes-list-type: map).
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the metadata.generation the daemon last acted on.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// LocalReference names an object in the referring object's namespace.
type LocalReference struct {
	Name string `json:"name"`
}

// NamespacedReference names an object by name and namespace. Where Namespace is optional
// (GitDestination.spec.repoRef, WatchRule.spec.destinationRef) it defaults to the referring
// object's namespace; use NamespaceOr to resolve it.
type NamespacedReference struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// NamespaceOr returns the reference's namespace, or def when it is empty.
func (r NamespacedReference) NamespaceOr(def string) string {
	if r.Namespace == "" {
		return def
	}
	return r.Namespace
}

// GitRepoConfig describes how to reach one Git repository and which branches may be written.
type GitRepoConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GitRepoConfigSpec   `json:"spec"`
	Status GitRepoConfigStatus `json:"status,omitzero"`
}

// GitRepoConfigSpec is the desired state of a GitRepoConfig.
type GitRepoConfigSpec struct {
	// RepoURL is an https, http, ssh or scp-like URL without credentials.
	RepoURL string `json:"repoUrl"`
	// AllowedBranches lists the branches GitDestinations may target (at least one).
	AllowedBranches []string `json:"allowedBranches"`
	// SecretRef names a Secret in the same namespace with Flux-style keys: username+password,
	// bearerToken, or identity+known_hosts for SSH.
	SecretRef *LocalReference `json:"secretRef,omitempty"`
	// Receiver asks for a Receiver and its Secret, generated for all of this repository's
	// destinations and owned by this GitRepoConfig; nil means none.
	Receiver *GeneratedReceiver `json:"receiver,omitempty"`
	// CommitSigning signs every commit the daemon writes into this repository; nil means unsigned.
	CommitSigning *CommitSigning `json:"commitSigning,omitempty"`
	// AccessPolicy admits GitDestinations of other namespaces; nil admits only this namespace.
	AccessPolicy *AccessPolicy `json:"accessPolicy,omitempty"`
}

// The formats of CommitSigning.
const (
	SigningSSH     = "ssh"
	SigningOpenPGP = "openpgp"
)

// SigningFormats lists every valid CommitSigning.Format, in the order of the schema's enum.
var SigningFormats = []string{SigningSSH, SigningOpenPGP}

// CommitSigning says how commits are signed.
type CommitSigning struct {
	// Format is SigningSSH (an OpenSSH private key; SSHSIG signatures, git's gpg.format=ssh) or
	// SigningOpenPGP (an armored OpenPGP private key).
	Format string `json:"format"`
	// SecretRef names a Secret in the GitRepoConfig's namespace with the key signingKey (the
	// private key), and passphrase when the key is encrypted.
	SecretRef LocalReference `json:"secretRef"`
}

// GitRepoConfigStatus is the observed state of a GitRepoConfig: the shared Status, the Receiver
// generated for spec.receiver, and the public side of spec.commitSigning's key.
type GitRepoConfigStatus struct {
	Status `json:",inline"`
	// Receiver reports the generated Receiver; nil until it exists.
	Receiver *GeneratedReceiverStatus `json:"receiver,omitempty"`
	// SigningKey is the public side of spec.commitSigning's key, to register with the Git host;
	// nil when commits are not signed or the key is unusable.
	SigningKey *SigningKeyStatus `json:"signingKey,omitempty"`
}

// SigningKeyStatus is the public side of the key a GitRepoConfig's commits are signed with.
type SigningKeyStatus struct {
	// Format is CommitSigning.Format.
	Format string `json:"format"`
	// PublicKey is an authorized_keys line (ssh) or an armored public key block (openpgp).
	PublicKey string `json:"publicKey"`
	// Fingerprint is SHA256:... (ssh) or the 40-hex key fingerprint (openpgp).
	Fingerprint string `json:"fingerprint"`
}

// GitDestination binds a repository branch and a folder: the subtree the daemon owns.
type GitDestination struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GitDestinationSpec   `json:"spec"`
	Status GitDestinationStatus `json:"status,omitzero"`
}

// GitDestinationSpec is the desired state of a GitDestination.
type GitDestinationSpec struct {
	// RepoRef points at a GitRepoConfig; Namespace defaults to the destination's.
	RepoRef NamespacedReference `json:"repoRef"`
	// Branch must be one of the repository's allowedBranches.
	Branch string `json:"branch"`
	// BaseFolder is a clean relative POSIX path inside the repository.
	BaseFolder string `json:"baseFolder"`
	// Layout is LayoutCanonical ("" too): the folder is the daemon's own, or LayoutExisting: the
	// team's, adopted as it is (DESIGN.md §11).
	Layout string `json:"layout,omitempty"`
	// Existing tunes an adopted folder; nil takes the defaults.
	Existing *ExistingLayout `json:"existing,omitempty"`
	// WriteBack turns edits made in Git under BaseFolder into Proposals; nil means off.
	WriteBack *WriteBack `json:"writeBack,omitempty"`
	// Encryption mirrors the Secrets that rules name explicitly as SOPS documents encrypted for
	// age recipients; nil means Secrets are skipped.
	Encryption *Encryption `json:"encryption,omitempty"`
	// AccessPolicy admits WatchRules of other namespaces; nil admits only this namespace.
	AccessPolicy *AccessPolicy `json:"accessPolicy,omitempty"`
	// Push says how changes reach Branch; nil pushes to it directly.
	Push *Push `json:"push,omitempty"`
	// ClusterRef names the RemoteCluster whose objects are mirrored (Namespace defaults to the
	// destination's); nil mirrors the cluster the daemon runs in.
	ClusterRef *NamespacedReference `json:"clusterRef,omitempty"`
}

// The layouts of a destination's folder.
const (
	LayoutCanonical = "Canonical" // one file per object at its canonical path, the whole object
	LayoutExisting  = "Existing"  // the team's own files, edited in place with what people changed
)

// ExistingLayout tunes an adopted folder.
type ExistingLayout struct {
	// NewFiles is the path template, inside BaseFolder, of an object no document holds yet:
	// {namespace} ("_cluster" for cluster-scoped objects), {kind}, {group}, {resource}, {name}.
	// Empty: beside the kustomization of the object's namespace, else the canonical path.
	NewFiles string `json:"newFiles,omitempty"`
	// Prune removes the documents of selected kinds whose objects are absent from the cluster
	// at a (re-)list; off, they are listed and left in place.
	Prune bool `json:"prune,omitempty"`
	// Kustomization is the folder, inside BaseFolder, of the kustomization the destination
	// renders (an overlay over bases elsewhere in the repository): a live change to an object
	// it renders is written where a person would make it there. Empty: BaseFolder itself, when
	// it holds a kustomization.
	Kustomization string `json:"kustomization,omitempty"`
}

// Adopted reports whether the destination's folder is the team's own (LayoutExisting).
func (d *GitDestination) Adopted() bool { return d.Spec.Layout == LayoutExisting }

// OverlayFolder is the folder, repository-relative ("" for the top), of the kustomization an
// adopted destination renders when it holds one: baseFolder joined with
// spec.existing.kustomization, or baseFolder itself. A kustomization path that leaves baseFolder
// (the CRD refuses one) is never followed: baseFolder it is.
func (d *GitDestination) OverlayFolder() string {
	folder := strings.Trim(path.Clean("/"+d.Spec.BaseFolder), "/")
	e := d.Spec.Existing
	if e == nil || e.Kustomization == "" {
		return folder
	}
	dir := path.Join(folder, e.Kustomization)
	if strings.HasPrefix(dir, "..") || folder != "" && !strings.HasPrefix(dir, folder+"/") && dir != folder {
		return folder
	}
	return dir
}

// The modes of Push.
const (
	PushDirect      = "Direct"      // commits are pushed to the branch, fast-forward only
	PushPullRequest = "PullRequest" // commits go to a head branch, delivered by a pull request
)

// The providers of a PullRequestPush: the Git hosts whose API opens the request.
const (
	ProviderGitea  = "gitea" // Gitea and Forgejo
	ProviderGitHub = "github"
	ProviderGitLab = "gitlab"
)

// Push says how a destination's changes reach its branch.
type Push struct {
	// Mode is PushDirect ("" too) or PushPullRequest.
	Mode string `json:"mode,omitempty"`
	// PullRequest configures the request when Mode is PushPullRequest.
	PullRequest *PullRequestPush `json:"pullRequest,omitempty"`
}

// PullRequestPush is how a destination's pull (merge) request is opened.
type PullRequestPush struct {
	// Provider is the Git host's kind (Provider* constants).
	Provider string `json:"provider"`
	// APIURL is the host's API; empty derives it from the repository's URL.
	APIURL string `json:"apiURL,omitempty"`
	// HeadBranch is the daemon's own branch the request is opened from; empty is
	// DefaultHeadBranch.
	HeadBranch string `json:"headBranch,omitempty"`
	// Labels are put on the request (those the repository has).
	Labels []string `json:"labels,omitempty"`
	// Draft opens the request as a draft.
	Draft bool `json:"draft,omitempty"`
}

// PullRequest is the destination's pull request settings, nil when it pushes directly.
func (d *GitDestination) PullRequest() *PullRequestPush {
	if d.Spec.Push == nil || d.Spec.Push.Mode != PushPullRequest {
		return nil
	}
	return d.Spec.Push.PullRequest
}

// HeadBranch is the branch the destination's request comes from: its own, or
// gitops-reverser/{namespace}/{name}. "" when it pushes directly.
func (d *GitDestination) HeadBranch() string {
	pr := d.PullRequest()
	switch {
	case pr == nil:
		return ""
	case pr.HeadBranch != "":
		return pr.HeadBranch
	}
	return "gitops-reverser/" + d.Namespace + "/" + d.Name
}

// ShownRequest is how the CLI and the page show the pull request of a destination that delivers
// by one (ok false for one that pushes directly): its head branch, the status's or else
// HeadBranch, and the request its status names, nil when it names none or the last one ended
// (merged or closed) with nothing left waiting.
func (d *GitDestination) ShownRequest() (head string, req *PullRequestStatus, ok bool) {
	if d.PullRequest() == nil {
		return "", nil, false
	}
	head, req = d.HeadBranch(), d.Status.PullRequest
	if req == nil {
		return head, nil, true
	}
	if req.HeadBranch != "" {
		head = req.HeadBranch
	}
	if req.Number == 0 || (req.State == "merged" || req.State == "closed") && req.ChangesWaiting == 0 {
		return head, nil, true
	}
	return head, req, true
}

// Lane is the branch the destination's changes are pushed to: its head branch when it delivers
// by pull request, else Branch. It names the Git worker that writes them.
func (d *GitDestination) Lane() string {
	if h := d.HeadBranch(); h != "" {
		return h
	}
	return d.Spec.Branch
}

// AccessPolicy says which other namespaces may refer to an object: the consent of the namespace
// referred to, as a ReferenceGrant gives it in the Gateway API.
type AccessPolicy struct {
	// Namespaces admitted by name.
	Namespaces []string `json:"namespaces,omitempty"`
	// NamespaceSelector admits the namespaces whose labels match; an empty one matches all.
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// Admits says whether the policy admits namespace from, by name or by its labels (nil when
// unknown: then only a name admits it). A nil policy admits nobody.
func (p *AccessPolicy) Admits(from string, labels map[string]string) bool {
	if p == nil {
		return false
	}
	if slices.Contains(p.Namespaces, from) {
		return true
	}
	if p.NamespaceSelector == nil || labels == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(p.NamespaceSelector)
	if err != nil {
		return false // the apiserver's schema refuses most; what it lets through admits nobody
	}
	return sel.Matches(k8slabels.Set(labels))
}

// EncryptionSOPS is the one Encryption provider: SOPS documents (values of data and stringData
// encrypted, metadata readable), which the sops CLI and Flux decrypt.
const EncryptionSOPS = "sops"

// Encryption says how Secrets are encrypted before they reach Git.
type Encryption struct {
	// Provider is EncryptionSOPS.
	Provider string `json:"provider"`
	// Age holds the recipients every Secret is encrypted for.
	Age *AgeRecipients `json:"age,omitempty"`
}

// AgeRecipients are age X25519 public keys ("age1..."), given inline, in a Secret of the
// destination's namespace whose key RecipientsKey holds one per line, or both (all of them).
type AgeRecipients struct {
	Recipients          []string        `json:"recipients,omitempty"`
	RecipientsSecretRef *LocalReference `json:"recipientsSecretRef,omitempty"`
}

// RecipientsKey is the key of a recipients Secret that holds the age recipients, one per line.
const RecipientsKey = "recipients"

// WriteBack configures write-back of one GitDestination: edits to files under its baseFolder,
// made by commits the daemon did not write, become Proposals to change the cluster.
type WriteBack struct {
	// Enabled turns Git edits under baseFolder into Proposals.
	Enabled bool `json:"enabled,omitempty"`
	// AutoApply applies create and update Proposals without review; a destroy is never
	// auto-applied. It has no effect unless Enabled is true (the schema refuses it).
	AutoApply bool `json:"autoApply,omitempty"`
	// Suspend keeps opening Proposals but applies nothing, not even approved ones.
	Suspend bool `json:"suspend,omitempty"`
}

// GitDestinationStatus is the observed state of a GitDestination: the shared Status and, when
// write-back has run, its progress.
type GitDestinationStatus struct {
	Status `json:",inline"`
	// WriteBack is written by the write-back reconciler; nil until it first runs.
	WriteBack *WriteBackStatus `json:"writeBack,omitempty"`
	// Git is the mirror's progress on the destination's branch: the last push and what waits.
	// Shared by every destination on the same repository and branch.
	Git *GitProgress `json:"git,omitempty"`
	// PullRequest is the request that delivers the destination's changes, when it has one.
	PullRequest *PullRequestStatus `json:"pullRequest,omitempty"`
	// Skipped says what the mirror leaves out, by reason (SkipReason* constants): generated
	// objects currently left out, and changes by excluded users or field managers since the
	// daemon started. Updated at each reconcile of the destination.
	Skipped []SkipCount `json:"skipped,omitempty"`
	// Adopted is what the mirror found in an adopted folder; nil for a canonical one.
	Adopted *AdoptedStatus `json:"adopted,omitempty"`
}

// AdoptedStatus is what the mirror found in an adopted folder (layout Existing): each list
// holds at most MaxAdoptedEntries entries and a last one that says how many more there are.
type AdoptedStatus struct {
	// Problems are the files that could not be read as Kubernetes documents though they meant
	// to be, and the objects two documents claim: those are not written; the rest goes on.
	Problems []string `json:"problems,omitempty"`
	// Unwritten are the objects whose last change was not written, and why.
	Unwritten []string `json:"unwritten,omitempty"`
	// Absent are the documents whose objects the cluster does not have, left in place.
	Absent []string `json:"absent,omitempty"`
}

// MaxAdoptedEntries bounds each list of AdoptedStatus.
const MaxAdoptedEntries = 50

// GitProgress is the mirror's progress on a branch, as its Git worker knows it.
type GitProgress struct {
	// LastPushedCommit is the SHA of the last commit the remote accepted from the daemon.
	LastPushedCommit string `json:"lastPushedCommit,omitempty"`
	// LastPushTime is when the remote accepted it.
	LastPushTime *metav1.Time `json:"lastPushTime,omitempty"`
	// LastPushAuthor is the author that commit names.
	LastPushAuthor string `json:"lastPushAuthor,omitempty"`
	// Pending counts the changes taken in and not pushed yet.
	Pending int `json:"pending"`
	// Failures counts the pushes and fetches that failed in a row since the last that worked.
	Failures int `json:"failures"`
	// LastError is the last push or fetch error, empty once one works again.
	LastError string `json:"lastError,omitempty"`
	// Owner is the replica that writes the destination, as its shard's Lease names it (with --shards=auto).
	Owner string `json:"owner,omitempty"`
}

// PullRequestStatus is the pull (merge) request that delivers a destination's changes.
type PullRequestStatus struct {
	// HeadBranch is the daemon's branch the request comes from.
	HeadBranch string `json:"headBranch"`
	// Number is the request's number on its host; 0 while none is known.
	Number int64 `json:"number,omitempty"`
	// URL is the request's web page.
	URL string `json:"url,omitempty"`
	// State is open, merged or closed.
	State string `json:"state,omitempty"`
	// HeadCommit is the tip of the head branch the request shows.
	HeadCommit string `json:"headCommit,omitempty"`
	// ChangesWaiting counts the files the head branch changes that the target lacks.
	ChangesWaiting int `json:"changesWaiting"`
	// OpenedAt is when the request was opened.
	OpenedAt *metav1.Time `json:"openedAt,omitempty"`
}

// SkipCount is how many objects or changes the mirror left out for one reason.
type SkipCount struct {
	Reason string `json:"reason"`
	Count  int64  `json:"count"`
}

// Reasons of SkipCount, also the values of the metric changes_skipped_total{reason}.
const (
	SkipReasonKubeRootCA            = "KubeRootCA" // ConfigMaps kube-root-ca.crt
	SkipReasonDefaultServiceAccount = "DefaultServiceAccount"
	SkipReasonControllerOwned       = "ControllerOwned" // an ownerReference with controller: true
	SkipReasonAutoUpdatedRBAC       = "AutoUpdatedRBAC" // rbac.authorization.kubernetes.io/autoupdate: "true"
	SkipReasonExcludedUser          = "ExcludedUser"
	SkipReasonExcludedFieldManager  = "ExcludedFieldManager"
	// SkipReasonDaemonsOwn: labelled app.kubernetes.io/managed-by: gitops-reverser, what the
	// daemon makes for itself (the keys of its Secrets, its admission policies).
	SkipReasonDaemonsOwn = "DaemonsOwn"
)

// SkipReasons lists every SkipCount reason, in the order of the schema's enum.
var SkipReasons = []string{
	SkipReasonKubeRootCA, SkipReasonDefaultServiceAccount, SkipReasonControllerOwned,
	SkipReasonAutoUpdatedRBAC, SkipReasonExcludedUser, SkipReasonExcludedFieldManager, SkipReasonDaemonsOwn,
}

// WriteBackStatus is the progress of write-back on one GitDestination.
type WriteBackStatus struct {
	// LastRevision is the commit the last complete write-back run reconciled up to.
	LastRevision string `json:"lastRevision,omitempty"`
	// LastSyncRun is the name of the last SyncRun, in the destination's namespace.
	LastSyncRun string `json:"lastSyncRun,omitempty"`
	// LastSyncTime is when the last SyncRun completed.
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`
	// LastHandledSyncNow is the value of the AnnotationSyncNow annotation last acted on; a
	// different value on the destination asks for a run now.
	LastHandledSyncNow string `json:"lastHandledSyncNow,omitempty"`
	// PendingProposals counts this destination's Proposals in phase Pending.
	PendingProposals int `json:"pendingProposals"`
	// Conditions holds Ready: whether and how an approval is known to come from its approver.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Operation is an admission operation a rule matches.
type Operation string

// Operations a rule may list; an empty list means all of them.
const (
	OperationCreate Operation = "CREATE"
	OperationUpdate Operation = "UPDATE"
	OperationDelete Operation = "DELETE"
	OperationAll    Operation = "*"
)

// ResourceRule selects resources, like an admission webhook rule. "*" is allowed in every list.
// Empty Resources means the desired-state default set.
type ResourceRule struct {
	Operations  []Operation `json:"operations,omitempty"`
	APIGroups   []string    `json:"apiGroups,omitempty"`
	APIVersions []string    `json:"apiVersions,omitempty"`
	Resources   []string    `json:"resources,omitempty"`
	// ExcludeUsers: a change made by one of these users is not committed (usernames, e.g.
	// system:serviceaccount:flux-system:kustomize-controller; a trailing * matches any suffix).
	// Who made a change is known from the admission webhook only: without attribution this
	// list matches nothing.
	ExcludeUsers []string `json:"excludeUsers,omitempty"`
	// ExcludeFieldManagers: a change is not committed when every field manager of the object's
	// newest managedFields entries (of the object itself, not its status) is one of these
	// (a trailing * matches any suffix), e.g. kustomize-controller, argocd-controller, helm.
	ExcludeFieldManagers []string `json:"excludeFieldManagers,omitempty"`
	// KeepGenerated mirrors the objects the cluster generates, which are left out by default:
	// ConfigMaps kube-root-ca.crt, the default ServiceAccount of each namespace, objects with a
	// controller ownerReference, and RBAC objects annotated rbac.authorization.kubernetes.io/autoupdate: "true".
	KeepGenerated bool `json:"keepGenerated,omitempty"`
	// ObjectSelector selects, of the resources the rule matches, only the objects whose labels
	// match it; nil selects them all. An object that stops matching leaves Git as a delete would.
	ObjectSelector *metav1.LabelSelector `json:"objectSelector,omitempty"`
}

// WatchRule selects namespaced resources in its own namespace for one GitDestination.
type WatchRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WatchRuleSpec `json:"spec"`
	Status Status        `json:"status,omitzero"`
}

// WatchRuleSpec is the desired state of a WatchRule.
type WatchRuleSpec struct {
	// DestinationRef points at a GitDestination; Namespace defaults to the rule's.
	DestinationRef NamespacedReference `json:"destinationRef"`
	// Rules is non-empty; an object is selected when any rule matches.
	Rules []ResourceRule `json:"rules"`
	// ServiceAccountName names a ServiceAccount of the rule's namespace that the rule acts as:
	// its rights bound what the rule mirrors (it must be allowed to list and watch every resource
	// the rules select), and write-back applies the rule's objects as it (impersonation). The
	// ServiceAccount must agree: its annotation AnnotationWatchRules lists the rule. Empty means
	// the daemon's --default-service-account, which needs no annotation (when that is empty too,
	// the rule reads with the daemon's own rights, except Secrets, and cannot write back).
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// AnnotationWatchRules on a ServiceAccount lists the WatchRules of its namespace that may act as
// it (comma-separated names, or "*" for all): naming a ServiceAccount in spec.serviceAccountName
// counts only with its consent, which only those who may edit ServiceAccounts can give.
const AnnotationWatchRules = "configbutler.ai/watchrules"

// ServiceAccountReference names a ServiceAccount of any namespace.
type ServiceAccountReference struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// String is the ServiceAccount as "namespace/name".
func (r ServiceAccountReference) String() string { return r.Namespace + "/" + r.Name }

// Username is the ServiceAccount's Kubernetes username, as RBAC and impersonation name it.
func (r ServiceAccountReference) Username() string {
	return "system:serviceaccount:" + r.Namespace + ":" + r.Name
}

// Consents reports whether a ServiceAccount's annotations (AnnotationWatchRules) let the
// WatchRule rule of its namespace act as it.
func Consents(annotations map[string]string, rule string) bool {
	for _, name := range strings.Split(annotations[AnnotationWatchRules], ",") {
		if name = strings.TrimSpace(name); name == "*" || name == rule {
			return true
		}
	}
	return false
}

// RuleScope says whether a ClusterWatchRule rule selects cluster-scoped or namespaced resources.
type RuleScope string

// Scopes of a ClusterResourceRule.
const (
	ScopeCluster    RuleScope = "Cluster"
	ScopeNamespaced RuleScope = "Namespaced"
)

// ClusterResourceRule is a ResourceRule with a scope.
type ClusterResourceRule struct {
	ResourceRule `json:",inline"`
	Scope        RuleScope `json:"scope"`
	// NamespaceSelector selects, of a Namespaced rule's resources, only the objects in namespaces
	// whose labels match it; nil selects every namespace.
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// ClusterWatchRule selects cluster-scoped and/or namespaced resources in every namespace.
type ClusterWatchRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterWatchRuleSpec `json:"spec"`
	Status Status               `json:"status,omitzero"`
}

// ClusterWatchRuleSpec is the desired state of a ClusterWatchRule.
type ClusterWatchRuleSpec struct {
	// DestinationRef points at a GitDestination; Namespace is required.
	DestinationRef NamespacedReference `json:"destinationRef"`
	// Rules is non-empty; an object is selected when any rule matches.
	Rules []ClusterResourceRule `json:"rules"`
	// ServiceAccountRef names the ServiceAccount that write-back applies the rule's objects as
	// (impersonation), cluster-scoped and namespaced alike; it needs no annotation, since only
	// cluster administrators create ClusterWatchRules. Without it the rule's objects are not
	// written back (their proposals wait). Reads stay with the daemon's own rights.
	ServiceAccountRef *ServiceAccountReference `json:"serviceAccountRef,omitempty"`
}
