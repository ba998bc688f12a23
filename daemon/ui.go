package daemon

import (
	"net"
)

// The values of --ui-auth.
const (
	uiAuthToken = "token"
	uiAuthNone  = "none"
)

// checkUI checks the operator page's flags: the page without sign-in shows every destination and
// proposal to whoever reaches it, so it may only listen where nobody else can.
func checkUI(cfg Config, check func(ok bool, key, format string, args ...any)) {
	check(cfg.UIAuth == uiAuthToken || cfg.UIAuth == uiAuthNone, keyUIAuth, "must be %s or %s, got %q", uiAuthToken, uiAuthNone, cfg.UIAuth)
	check(cfg.UICertDir == "" || cfg.UIBindAddress != "", keyUICertDir, "has no effect without %s", keyUIBindAddress)
	if cfg.UIBindAddress == "" {
		return
	}
	host, port, err := net.SplitHostPort(cfg.UIBindAddress)
	check(err == nil && port != "", keyUIBindAddress, "must be host:port or :port, got %q", cfg.UIBindAddress)
	if err == nil && cfg.UIAuth == uiAuthNone {
		check(isLoopback(host), keyUIAuth, "%s shows everything without signing in, so %s must be a loopback address (127.0.0.1:port, [::1]:port or localhost:port), got %q",
			uiAuthNone, keyUIBindAddress, cfg.UIBindAddress)
	}
}

// isLoopback reports whether host only ever resolves to this machine: an empty host means every
// interface.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
