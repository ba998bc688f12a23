package crds

import (
	"cmp"
	"encoding/json"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The write-back kinds: a Proposal is one change to the cluster that an edit in Git asks for;
// a SyncRun records one reconcile of a GitDestination's write-back. Both live in the namespace of
// their GitDestination and carry LabelDestination.

// Kind names of the write-back kinds.
const (
	KindProposal = "Proposal"
	KindSyncRun  = "SyncRun"
)

// Resources of the write-back kinds for the dynamic client.
var (
	Proposals = GroupVersion.WithResource("proposals")
	SyncRuns  = GroupVersion.WithResource("syncruns")
)

// AnnotationSyncNow on a GitDestination asks for a write-back reconcile now: any value other than
// status.writeBack.lastHandledSyncNow triggers one (e.g. a timestamp).
const AnnotationSyncNow = "configbutler.ai/sync-now"

// SyncNowPatch is the merge patch of a GitDestination that asks for a write-back run now, and the
// value of AnnotationSyncNow it sets: the time, which the daemon has not handled yet.
func SyncNowPatch(now time.Time) (value string, patch []byte) {
	value = now.UTC().Format(time.RFC3339Nano)
	patch, _ = json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnotationSyncNow: value}}}) // strings always encode
	return value, patch
}

// DecisionPatch is the merge patch of a Proposal by which a reviewer sets its decision, naming
// themselves in spec.decidedBy as the validating policy asks (the mutating one writes the same).
func DecisionPatch(decision Decision, by Reviewer) []byte {
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"decision": decision, "decidedBy": by}}) // strings always encode
	return patch
}

// LabelDestination on Proposals and SyncRuns holds the name of their GitDestination, so they can
// be listed per destination with a label selector.
const LabelDestination = "configbutler.ai/destination"

// ProposalChange is what a Proposal does to its target.
type ProposalChange string

// The changes a Proposal may propose.
const (
	ChangeCreate  ProposalChange = "create"
	ChangeUpdate  ProposalChange = "update"
	ChangeDestroy ProposalChange = "destroy"
)

// Decision is a reviewer's verdict on a Proposal, the only field of its spec a person sets.
type Decision string

// The decisions a reviewer may take; DecisionNone means not reviewed yet.
const (
	DecisionNone    Decision = ""
	DecisionApprove Decision = "Approve"
	DecisionReject  Decision = "Reject"
	DecisionIgnore  Decision = "Ignore"
)

// ProposalPhase is where a Proposal stands.
type ProposalPhase string

// Phases of a Proposal. Pending is the only one that can still lead to an apply.
const (
	// PhasePending waits for a decision, or for an approved apply to succeed.
	PhasePending ProposalPhase = "Pending"
	// PhaseApplied: the change was made to the cluster.
	PhaseApplied ProposalPhase = "Applied"
	// PhaseRejected: a reviewer rejected it; the mirror writes the live state back over the edit.
	PhaseRejected ProposalPhase = "Rejected"
	// PhaseIgnored: a reviewer chose to neither apply nor revert it.
	PhaseIgnored ProposalPhase = "Ignored"
	// PhaseStale: the live object changed since the Proposal was computed.
	PhaseStale ProposalPhase = "Stale"
	// PhaseSuperseded: a newer Proposal for the same target replaced it (status.supersededBy).
	PhaseSuperseded ProposalPhase = "Superseded"
	// PhaseForeign: the daemon did not open it (no valid AnnotationSeal): it is never applied,
	// never holds a file and never writes anything to Git.
	PhaseForeign ProposalPhase = "Foreign"
)

// AnnotationSeal on a Proposal is the daemon's proof that it opened it: an HMAC-SHA256 (hex),
// keyed by a secret only the daemon holds, over the Proposal's namespace, name and spec without
// its decision. A Proposal without a valid one is Foreign.
const AnnotationSeal = "configbutler.ai/seal"

// ConditionApplied is the condition a Proposal reports: True once its change was applied.
const ConditionApplied = "Applied"

// Proposal is one change to one object of the cluster that a commit in Git asks for. Its spec
// is immutable except Decision, which a reviewer sets; the daemon reports in its status.
type Proposal struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProposalSpec   `json:"spec"`
	Status ProposalStatus `json:"status,omitzero"`
}

// ProposalSpec is what a Proposal proposes, computed by the daemon, and the reviewer's decision.
type ProposalSpec struct {
	// DestinationRef names the GitDestination, in the Proposal's namespace, whose folder holds Path.
	DestinationRef LocalReference `json:"destinationRef"`
	// Change is create, update or destroy.
	Change ProposalChange `json:"change"`
	// Target is the object the change applies to.
	Target ProposalTarget `json:"target"`
	// Path is the file in the repository, under the destination's baseFolder.
	Path string `json:"path"`
	// SourceCommit is the 40-hex SHA of the commit that made the edit.
	SourceCommit string `json:"sourceCommit"`
	// Author is the Git author of SourceCommit.
	Author GitAuthor `json:"author"`
	// Desired is the file's YAML, "" for a destroy.
	Desired string `json:"desired"`
	// Diff is a unified diff from the live object to Desired.
	Diff string `json:"diff"`
	// LiveResourceVersion is the resourceVersion of the live object the diff was computed
	// against, "" for a create.
	LiveResourceVersion string `json:"liveResourceVersion"`
	// LiveDigest is the sha256 (hex) of the sanitized live YAML the diff was computed against,
	// "" for a create.
	LiveDigest string `json:"liveDigest"`
	// Decision is the reviewer's verdict; DecisionNone until reviewed.
	Decision Decision `json:"decision,omitempty"`
	// DecidedBy is who set Decision: written by the apiserver's admission policy, or checked by
	// it to be the requester. Trusted only with the stamp of the policies in force now.
	DecidedBy *Reviewer `json:"decidedBy,omitempty"`
}

// ProposalTarget identifies the object a Proposal changes.
type ProposalTarget struct {
	// APIVersion is group/version, or the version for the core group.
	APIVersion string `json:"apiVersion"`
	// Kind of the object.
	Kind string `json:"kind"`
	// Resource is the plural lowercase resource name, e.g. deployments.
	Resource string `json:"resource"`
	// Namespace of the object; empty for cluster-scoped objects.
	Namespace string `json:"namespace,omitempty"`
	// Name of the object.
	Name string `json:"name"`
}

// GitAuthor is the author of a commit.
type GitAuthor struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

// Reviewer is the user who set a Proposal's decision, as the apiserver authenticated them.
type Reviewer struct {
	Username string   `json:"username"`
	UID      string   `json:"uid,omitempty"`
	Groups   []string `json:"groups,omitempty"`
	// Stamp is the epoch of the daemon's admission policies when the decision was made: the
	// mutating policy writes it; under the validating policy alone the reviewer copies it from
	// the Proposal's status.stamp. A decision whose stamp is not the current epoch is asked again.
	Stamp string `json:"stamp,omitempty"`
}

// ProposalStatus is what the daemon did with a Proposal.
type ProposalStatus struct {
	// Conditions holds ConditionApplied.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the metadata.generation the daemon last acted on.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is where the Proposal stands.
	Phase ProposalPhase `json:"phase,omitempty"`
	// Message explains the phase, e.g. why an apply failed.
	Message string `json:"message,omitempty"`
	// ReviewedBy is who set the decision.
	ReviewedBy *Reviewer `json:"reviewedBy,omitempty"`
	// AutoApplied is true when the daemon applied the change without review (writeBack.autoApply).
	AutoApplied bool `json:"autoApplied,omitempty"`
	// AutoApplyAttempts counts the automatic applies of this proposal that did not reach the
	// apiserver (it failed to answer, or a webhook it calls did). The daemon tries again, waiting
	// longer each time, and after 5 attempts leaves the proposal to a person.
	AutoApplyAttempts int32 `json:"autoApplyAttempts,omitempty"`
	// AutoApplyRetryAt is when the daemon tries the automatic apply again.
	AutoApplyRetryAt *metav1.Time `json:"autoApplyRetryAt,omitempty"`
	// DecidedAt is when the decision was acted on.
	DecidedAt *metav1.Time `json:"decidedAt,omitempty"`
	// AppliedAt is when the change was applied.
	AppliedAt *metav1.Time `json:"appliedAt,omitempty"`
	// SupersededBy names the Proposal that replaced this one (phase Superseded).
	SupersededBy string `json:"supersededBy,omitempty"`
	// Stamp is the current epoch of the daemon's admission policies, as last written: what
	// spec.decidedBy.stamp must carry where only the validating policy is in force.
	Stamp string `json:"stamp,omitempty"`
}

// SyncRun triggers: what started a run. SyncRunSpec.Trigger is a free string; these are the
// values the daemon writes.
const (
	TriggerInterval = "interval"
	TriggerSyncNow  = "sync-now"
	TriggerStartup  = "startup"
	TriggerApproval = "approval"
	// TriggerReceiver: a Receiver accepted a webhook for the destination.
	TriggerReceiver = "receiver"
)

// SyncRun records one write-back reconcile of a GitDestination. The daemon creates it with its
// status in one call (there is no status subresource) and updates it when the run ends.
type SyncRun struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SyncRunSpec   `json:"spec"`
	Status SyncRunStatus `json:"status,omitzero"`
}

// CompareSyncRuns orders SyncRuns oldest first. Creation times have whole seconds; the runs of
// one destination follow each other, so within a second the etcd revision of their last write
// orders them.
func CompareSyncRuns(a, b *SyncRun) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	ra, _ := strconv.ParseInt(a.ResourceVersion, 10, 64)
	rb, _ := strconv.ParseInt(b.ResourceVersion, 10, 64)
	return cmp.Compare(ra, rb)
}

// SyncRunSpec says which destination was reconciled and why.
type SyncRunSpec struct {
	// DestinationRef names the GitDestination, in the SyncRun's namespace.
	DestinationRef LocalReference `json:"destinationRef"`
	// Trigger is what started the run: interval, sync-now, startup, approval or receiver
	// (Trigger* constants).
	Trigger string `json:"trigger"`
}

// SyncRunPhase is how a run went.
type SyncRunPhase string

// Phases of a SyncRun.
const (
	SyncRunRunning SyncRunPhase = "Running"
	SyncRunSuccess SyncRunPhase = "Success"
	SyncRunFailed  SyncRunPhase = "Failed"
	// SyncRunPartial: the run completed but refused some files, failed some applies, or stopped at
	// the cap of proposals per run (only then does the next run read the same edits again).
	SyncRunPartial SyncRunPhase = "Partial"
)

// ConditionComplete is the condition a SyncRun reports: True once the run has ended.
const ConditionComplete = "Complete"

// MaxRefusedListed bounds SyncRunStatus.Refused; RefusedTotal counts them all.
const MaxRefusedListed = 50

// SyncRunStatus is what one run found and did.
type SyncRunStatus struct {
	// Conditions holds ConditionComplete.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Phase is how the run went.
	Phase SyncRunPhase `json:"phase,omitempty"`
	// StartedAt is when the run started.
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// CompletedAt is when the run ended; nil while Running.
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// BaseRevision is the commit the run counted edits from: the previous complete run's revision
	// or, on a first run, the daemon's newest commit (the tip when it wrote none).
	BaseRevision string `json:"baseRevision,omitempty"`
	// Revision is the commit this run reconciled up to.
	Revision string `json:"revision,omitempty"`
	// Differences counts the differences found between Git and the cluster, per kind and change.
	Differences []DifferenceCount `json:"differences,omitempty"`
	// DifferenceTotal is the sum of Differences.
	DifferenceTotal int `json:"differenceTotal"`
	// ProposalsOpened is how many Proposals the run created.
	ProposalsOpened int `json:"proposalsOpened"`
	// Applied is how many changes the run applied.
	Applied int `json:"applied"`
	// Refused lists files the run refused to turn into Proposals, at most MaxRefusedListed.
	Refused []RefusedFile `json:"refused,omitempty"`
	// RefusedTotal counts every refused file, listed or not.
	RefusedTotal int `json:"refusedTotal"`
	// Error says why the run failed.
	Error string `json:"error,omitempty"`
}

// DifferenceCount is the number of differences of one kind and change.
type DifferenceCount struct {
	// Group is the API group; empty for the core group.
	Group string `json:"group,omitempty"`
	// Kind of the objects.
	Kind string `json:"kind"`
	// Change is create, update or destroy.
	Change ProposalChange `json:"change"`
	// Count is how many.
	Count int `json:"count"`
}

// RefusedFile is a file under the destination's folder that write-back would not act on.
type RefusedFile struct {
	// Path of the file in the repository.
	Path string `json:"path"`
	// Reason is a CamelCase identifier, e.g. TooLarge, MultipleDocuments, Unparseable,
	// PathMismatch, OutsideBaseFolder, NotAFile or Secret (the writeback package's Reason constants).
	Reason string `json:"reason"`
	// Message explains the refusal.
	Message string `json:"message"`
}
