package bearer

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Hosts are the names a request may address the server by, besides the
// loopback ones: the listen address's host, if a name, and those given
// for a proxy's public name. A Guard wants every request's Host and
// Origin to name one of them, or the address the connection came in on,
// before it even reads the token: a page from another origin, or a name
// rebound to this server's address (DNS rebinding), never gets further,
// whatever it sends.
type Hosts map[string]bool

// NewHosts is the allowed set for the listen address and the names
// given, each of which may be a list separated by commas or spaces; a
// name may carry a port, which is ignored.
func NewHosts(addr string, names ...string) Hosts {
	h := Hosts{}
	for _, list := range append(names, addr) {
		for _, n := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' }) {
			if n = hostname(n); n != "" && net.ParseIP(n) == nil {
				h[n] = true
			}
		}
	}
	return h
}

// check says why r may not pass, or "" if it may.
func (h Hosts) check(r *http.Request) string {
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
func (h Hosts) allows(r *http.Request, host string) bool {
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
