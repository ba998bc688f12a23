// Package writeback is the Git → cluster half of the product. After each fetch of a write-back
// destination it reads the files under the destination's folder that people (not the daemon)
// changed, compares each with the live object and opens a Proposal for every difference. A
// proposal is applied with server-side apply once a person approved it, and only when that
// person may make the change themselves; or at once when the destination auto-applies and the
// change is not a destroy. Every reconcile is recorded as a SyncRun. While a proposal waits, the
// mirror leaves its file as the person wrote it (a hold on the Git worker); a live change makes
// the proposal Stale and the mirror writes the cluster's state again: the cluster is the truth.
package writeback
