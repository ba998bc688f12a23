// Package gitstore keeps the bare clone of one branch as an object store, below the Git worker
// of package gitops that batches, commits and pushes. A Repo is the clone on disk: it is opened
// (or made anew) without the network, fetched into, renewed when it grew, and it takes in what a
// push landed as packs of its own, compacting them as they pile up. Its Store reads the clone's
// objects and holds those of the commits being built in memory: the trees are built from
// file-level changes with deltas against their previous versions, and the objects leave as one
// pack that the worker sends and the clone keeps once the remote accepted it, where the next
// change of a file reads its blob again without asking go-git. A Reader is the read-only face of
// both, for what is built on Git history elsewhere (package gitedits, through gitops.Reader).
// ParseCommit and ParseIdent are the one reading of a commit and its author and committer lines,
// as git itself reads them, for every package that reads commits.
//
// One goroutine owns a Repo and its Store, as go-git is not safe for more.
package gitstore
