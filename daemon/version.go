package daemon

// Version is the daemon's version, printed by --version. Builds set it at link time, as make image
// does: go build -ldflags="-X github.com/configbutler/gitops-reverser/daemon.Version=1.2.3".
// It is the one variable the linker writes; nothing else reads globals.
var Version = "dev"
