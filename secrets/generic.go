package secrets

import (
	"encoding/base64"
	"math"
	"strings"
)

// genericRule catches a high-entropy value assigned to a secret-named field
// in any common syntax: JSON, YAML, TOML, .env, shell exports and code
// (client_secret, SECRET_KEY = '…', api_key="…"). The name ends at the
// separator; the value is judged by isGenericValue, which lets references
// (os.environ["X"], ENV['X'], cfg.Secret), templates and placeholders through.
var genericRule = func() rule {
	r := assign("generic-secret-assignment", "secret-named field with a high-entropy value",
		`(?i:secret|token|api[_-]?key|access[_-]?key|private[_-]?key|auth[_-]?key|credentials?|passphrase|signing[_-]?key|encryption[_-]?key|master[_-]?key)`+
			`([A-Za-z0-9_.-]{0,40})`+q+`\]?`+sepPattern+
			`(?:\\?"([^"\\\r\n]{1,200})\\?"|'([^'\r\n]{1,200})'|\x60([^\x60\r\n]{1,200})\x60|([^\s;&,"'\x60()\\\[\]{}<>]{1,200}))`,
		isGenericValue,
		"secret", "token", "api_key", "api-key", "apikey", "access_key", "access-key", "accesskey",
		"private_key", "private-key", "privatekey", "auth_key", "auth-key", "authkey", "credential",
		"passphrase", "signing_key", "signing-key", "encryption_key", "encryption-key", "master_key", "master-key")
	r.generic = true
	r.ahead = nameSepAhead
	r.span = 300
	r.bounded, r.minValue = true, 16
	r.pre = mixedClasses
	return r
}()

// nameSepAhead reports whether the rest of a field name and then a separator
// follow the keyword; it spares the regexp most mentions of "token" in prose.
func nameSepAhead(s string, end int) bool {
	j := end
	for n := 0; j < len(s) && n < 40 && (isAlnum(s[j]) || s[j] == '_' || s[j] == '-' || s[j] == '.'); n++ {
		j++
	}
	return sepAhead(s, j) || j < len(s) && s[j] == ']' && sepAhead(s, j+1)
}

// nonSecretNames are field-name tails that hold something about a secret
// rather than the secret: its hash, name, location, kind or lifetime.
var nonSecretNames = []string{
	"hash", "digest", "sha", "checksum", "name", "url", "uri", "endpoint", "path", "file",
	"type", "count", "limit", "len", "size", "ref", "env", "var", "version", "provider",
	"kind", "field", "header", "prefix", "ttl", "expir", "id", "usage", "max", "min",
	"format", "mode", "source", "store", "manager", "arn", "label", "policy", "scope",
}

func isGenericValue(s string, m []int) bool {
	if m[0] > 0 && isAlnum(s[m[0]-1]) && !isLowerUpperEdge(s, m[0]) && s[m[0]-1] != '_' {
		// the keyword is inside a word, e.g. "notoken" or "tokens" is fine but
		// "ksecret"... allow camelCase joins (clientSecret) and snake_case.
		if c := s[m[0]-1]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	tail := strings.ToLower(s[m[2]:m[3]])
	for _, w := range nonSecretNames {
		if strings.Contains(tail, w) {
			return false
		}
	}
	var v string
	quoted := false
	for g := 2; g <= 5; g++ {
		if x, ok := group(s, m, g); ok {
			v, quoted = x, g < 5
			break
		}
	}
	if !quoted && m[1] < len(s) {
		switch s[m[1]] {
		case '(', '[', '.', '{':
			return false // a call, an index or a longer expression
		}
	}
	return randomString(v, quoted)
}

// isLowerUpperEdge reports a camelCase join at s[i]: lower then upper.
func isLowerUpperEdge(s string, i int) bool {
	return i > 0 && 'a' <= s[i-1] && s[i-1] <= 'z' && 'A' <= s[i] && s[i] <= 'Z'
}

// randomString reports a value that looks generated rather than written:
// long enough, varied, not a reference, a path, an identifier or prose.
func randomString(v string, quoted bool) bool {
	if len(v) < 16 || placeholderPassword(v) || strings.ContainsAny(v, " \t") {
		return false
	}
	switch c := v[0]; {
	case quoted && !strings.ContainsRune("~.", rune(c)):
		// generated keys start with any symbol; a quote says it is a value
	case strings.ContainsRune("%<{[(~.@#&*", rune(c)):
		return false
	}
	if strings.Contains(v, "://") || isDottedIdent(v) || wordySegments(v) || fillerToken(v) {
		return false
	}
	c := classes(v)
	h := entropy(v)
	switch {
	case c&digitClass != 0 && c&(lowerClass|upperClass) != 0:
		return h >= 3.0
	case c == lowerClass|upperClass:
		return h >= 3.5 && !camelIdent(v)
	}
	return false
}

// wordySegments reports a value made of words joined by separators, such as
// my-tls-secret-2024 or MY_SECRET_NAME: names, not generated values.
func wordySegments(v string) bool {
	segs := strings.FieldsFunc(v, func(r rune) bool { return strings.ContainsRune("_-.:/", r) })
	if len(segs) < 2 {
		return false
	}
	for _, g := range segs {
		c := classes(g)
		switch {
		case c == lowerClass, c == upperClass:
			if len(g) > 12 {
				return false
			}
		case c == digitClass:
			if len(g) > 8 {
				return false
			}
		case c == lowerClass|upperClass && camelIdent(g):
		default:
			return false
		}
	}
	return true
}

// camelIdent reports letters that read as CamelCase words: almost every
// capital is followed by two or more small letters. Random mixed-case text
// has many capitals side by side or one small letter between two.
func camelIdent(v string) bool {
	odd := 0
	for i := 0; i+1 < len(v); i++ {
		up := isUpper(v[i])
		if up && isUpper(v[i+1]) {
			odd++
		}
		if up && i+2 < len(v) && !isUpper(v[i+1]) && isUpper(v[i+2]) {
			odd++
		}
	}
	return odd <= 2
}

func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }

// entropy is the Shannon entropy of v in bits per byte.
func entropy(v string) float64 {
	var n [256]int
	for i := 0; i < len(v); i++ {
		n[v[i]]++
	}
	h := 0.0
	for _, k := range n {
		if k > 0 {
			p := float64(k) / float64(len(v))
			h -= p * math.Log2(p)
		}
	}
	return h
}

// randomValue vets the last group of a field-anchored provider key.
func randomValue(s string, m []int) bool {
	v := s[m[len(m)-2]:m[len(m)-1]]
	if m[1] < len(s) && isWord(s[m[1]]) {
		return false
	}
	c := classes(v)
	if fillerToken(v) || bits(c) < 2 {
		return false
	}
	return c&digitClass != 0 || !camelIdent(v)
}

// isDiscord wants the first segment to decode to a numeric user id.
func isDiscord(s string, m []int) bool {
	first := s[m[0] : m[2]-1]
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(first, "="))
	if err != nil || len(b) < 17 || len(b) > 20 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return !fillerToken(s[m[4]:m[5]])
}

// isTelegram wants the bot id before ":AA": 8 to 10 digits, standing alone
// or after "bot" as in an API URL.
func isTelegram(s string, m []int) bool {
	if m[1] < len(s) && isWord(s[m[1]]) {
		return false
	}
	j := m[0]
	for j > 0 && m[0]-j < 11 && '0' <= s[j-1] && s[j-1] <= '9' {
		j--
	}
	if n := m[0] - j; n < 8 || n > 10 {
		return false
	}
	if j > 0 && isWord(s[j-1]) && !(j >= 3 && strings.EqualFold(s[j-3:j], "bot")) {
		return false
	}
	return !fillerToken(s[m[2]:m[3]])
}

// isTwilioPair wants an account SID with a 32-hex auth token near it: a SID
// alone identifies an account, it does not open it.
func isTwilioPair(s string, m []int) bool {
	if fillerToken(s[m[2]:m[3]]) {
		return false
	}
	lo, hi := max(0, m[0]-256), min(len(s), m[1]+256)
	for i := lo; i < hi; {
		if !isHex(s[i]) || i > 0 && isWord(s[i-1]) {
			i++
			continue
		}
		j := i
		for j < hi && isHex(s[j]) {
			j++
		}
		if j-i == 32 && (j == len(s) || !isWord(s[j])) && i != m[2] && !fillerToken(s[i:j]) && classes(s[i:j]) == lowerClass|digitClass {
			return true
		}
		i = j
	}
	return false
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

// isAWSKeyID lets upper-case words (ASIAPACIFIC…) through: real key ids
// almost always hold a digit, and letters-only ones rarely read as words.
func isAWSKeyID(s string, m []int) bool {
	b := s[m[2]:m[3]]
	if fillerToken(b) {
		return false
	}
	if classes(b)&digitClass != 0 {
		return true
	}
	vowels := 0
	for i := 0; i < len(b); i++ {
		if strings.IndexByte("AEIOU", b[i]) >= 0 {
			vowels++
		}
	}
	return vowels*10 < len(b)*3
}

// isDSN looks back from "@tcp(" for user:password, as in a Go MySQL DSN.
func isDSN(s string, m []int) bool {
	j := m[0]
	for j > 0 && m[0]-j < 256 {
		c := s[j-1]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '"' || c == '\'' || c == '`' || c == '=' || c == '/' || c == '(' {
			break
		}
		j--
	}
	user, pass, ok := strings.Cut(s[j:m[0]], ":")
	if !ok || pass == "" || pass == user {
		return false
	}
	return !placeholderPassword(pass) && !strings.ContainsAny(pass, "%+")
}

// base64Secret vets an Azure key: base64 with a real spread of characters.
func base64Secret(s string, m []int) bool {
	v := s[m[2]:m[3]]
	return !fillerToken(v) && bits(classes(v)) >= 2
}

// sasParam marks a URL query or connection string around a sig= value.
var sasParam = later(`(?i)[?&;](?:sv|se|sp|sr|ss|srt|st|spr|skoid)=`)

// isSASSig wants sig= as a query parameter, with a value that decodes to
// an HMAC-SHA256 (32 bytes), next to other SAS parameters.
func isSASSig(s string, m []int) bool {
	if m[0] > 0 && isWord(s[m[0]-1]) {
		return false
	}
	v := s[m[2]:m[3]]
	v = strings.NewReplacer("%2B", "+", "%2b", "+", "%2F", "/", "%2f", "/", "%3D", "=", "%3d", "=").Replace(v)
	v = strings.TrimRight(v, "=")
	if len(v) < 40 || strings.Contains(v, "%") || fillerToken(v) || bits(classes(v)) < 2 {
		return false
	}
	lo, hi := max(0, m[0]-512), min(len(s), m[1]+512)
	return sasParam().MatchString(s[lo:hi])
}

// assignEnd returns where the first value after a field keyword (which ends
// at kwEnd) ends at the latest, and how long that value is at most: past the
// rest of the name, the separator and any quotes, then to the closing quote
// or the first byte a bare value cannot hold. A run of '=' ends a bare
// value, as base64 padding does, so "k=k=k=…" is cut at every step. n is -1
// when no separator follows the name, so no assignment can match.
func assignEnd(s string, kwEnd int) (end, n int) {
	j := kwEnd
	if kwEnd > 0 && s[kwEnd-1] == '=' {
		return valueEnd(s, j)
	}
	for k := 0; j < len(s) && k < 48 && (isAlnum(s[j]) || s[j] == '_' || s[j] == '-' || s[j] == '.'); k++ {
		j++
	}
	nameEnd := j
	for k := 0; j < len(s) && k < 16 && strings.IndexByte("\\\"'`] \t:=>", s[j]) >= 0; k++ {
		closesName := j == nameEnd || j == nameEnd+1 && s[nameEnd] == '\\'
		if (s[j] == '"' || s[j] == '\'' || s[j] == '`') && !closesName {
			// A quoted value: up to its closing quote.
			v := s[j+1 : min(len(s), j+1+256)]
			if k := strings.IndexByte(v, s[j]); k >= 0 {
				v = v[:k]
			}
			return min(len(s), j+1+len(v)+1), len(v)
		}
		j++
	}
	if j == nameEnd {
		return j, -1
	}
	return valueEnd(s, j)
}

// valueEnd is assignEnd for a bare value starting at vs.
func valueEnd(s string, vs int) (end, n int) {
	j := vs
	for k := 0; j < len(s) && k < 256; k++ {
		c := s[j]
		if c == '=' {
			n := j - vs
			for j < len(s) && s[j] == '=' {
				j++
			}
			return min(len(s), j+1), n
		}
		if c <= ' ' || strings.IndexByte(";&,\"'`()<>[]{}\\", c) >= 0 {
			break
		}
		j++
	}
	return min(len(s), j+1), j - vs
}

// mixedClasses is what randomString needs at least: a digit and a letter,
// or both letter cases.
func mixedClasses(v string) bool { c := classes(v); return bits(c) >= 2 }

// notFiller is what isPasswordValue needs at least: no filler password.
func notFiller(v string) bool { return !passwordFillers[strings.ToLower(v)] }
