package main

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// hosts are the names a request may address the team server by, besides
// the loopback ones: the --http address's host, if a name, and those of
// --allowed-host and PROMETHEUS_MEMORY_ALLOWED_HOSTS, for a proxy's public
// name. Every request's Host and Origin must name one of them, or the
// address the connection came in on, before its token is even read:
// a page from another origin, or a name rebound to this server's address
// (DNS rebinding), never reaches the MCP handler, whatever it sends.
type hosts map[string]bool

// newHosts is the allowed set for the listen address and the names
// given; each name may carry a port, which is ignored.
func newHosts(addr string, names ...string) hosts {
	h := hosts{}
	for _, n := range append(names, addr) {
		if n = hostname(n); n != "" && net.ParseIP(n) == nil {
			h[n] = true
		}
	}
	return h
}

// splitHosts splits a list of names separated by commas or spaces.
func splitHosts(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
}

// check says why r may not pass, or "" if it may.
func (h hosts) check(r *http.Request) string {
	if !h.allows(r, r.Host) {
		return "this server does not answer to that host name"
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host == "" || !h.allows(r, u.Host) {
			return "requests from that origin are not allowed"
		}
	}
	return ""
}

// allows says whether host (with or without a port) names this server
// for r: a loopback name, an allowed one, or the address r came in on.
func (h hosts) allows(r *http.Request, host string) bool {
	name := hostname(host)
	if name == "localhost" || h[name] {
		return true
	}
	ip := net.ParseIP(name)
	if ip == nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	at, _, err := net.SplitHostPort(local.String())
	return err == nil && net.ParseIP(at).Equal(ip)
}

// hostname is host without its port or brackets, in lower case.
func hostname(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.ToLower(strings.Trim(host, "[]"))
}
