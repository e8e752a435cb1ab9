package secrets

import (
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
)

// rule is one secret shape.
//
// The scanner finds keywords in a single case-folded pass and runs re
// anchored at each hit, so every pattern must begin with one of its rule's
// keywords. That keeps regexp work proportional to the hits, not to the input.
type rule struct {
	id, desc string
	keywords []string
	// fold makes keywords match in any case. Token prefixes are
	// case-sensitive ("SK" is Twilio, "sk" is the word "ask"); field names
	// such as Authorization and password are not.
	fold bool
	// token marks a self-identifying token. It must not be glued to word
	// characters on either side, or "task-..." would hold an "sk-" key.
	token bool
	// glued lets a token touch '-' and '_' on either side: an AWS key id
	// is distinctive enough that "prod-AKIA…" in a slug, a tag or a file
	// name is still a key, where "task-sk-…" is not an OpenAI one.
	glued bool
	// span caps how far past the keyword the pattern may look. It bounds the
	// work one hit can cost, so input full of keywords stays linear.
	span int
	// ahead, if set, is a cheap necessary condition on the text after the
	// keyword (which ends at end). It spares the regexp the many mentions of
	// "password", "Authorization" and "://" in ordinary prose and code.
	ahead func(s string, end int) bool
	// re is compiled the first time a hit needs it (see later).
	re func() *regexp.Regexp
	// check vets a match the pattern alone cannot judge; m holds absolute
	// submatch offsets into s.
	check func(s string, m []int) bool
	// generic marks a rule that judges by a field's name and the value's
	// entropy; a specific rule matching inside its value takes precedence.
	generic bool
	// bounded cuts the text the pattern sees at the end of the first value
	// after the keyword (see assignEnd), so that text packed with the
	// keyword costs each hit a few bytes, not the whole span.
	bounded bool
	// minValue is the shortest value the pattern accepts, checked against
	// assignEnd's cheap estimate before the pattern runs. Zero still wants
	// a separator after the name.
	minValue int
	// pre, if set, is a cheap necessary condition on that estimate.
	pre func(v string) bool
}

const defaultSpan = 512

// later compiles pattern the first time it is needed. Most text reaches no
// rule's pattern, and few texts reach more than one: compiling all of them
// when the package loaded cost every process 1.2 ms and 1.3 MB of
// allocations (0.4 MB kept), hook commands and reads included.
// TestEveryPatternCompiles compiles each one.
func later(pattern string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(pattern) })
}

// tok declares a self-identifying token. The first participating group of
// pattern is its random body, which must not be a placeholder.
func tok(id, desc, pattern string, keywords ...string) rule {
	return rule{
		id: id, desc: desc, keywords: keywords,
		token: true, span: defaultSpan,
		re:    later(`^(?:` + pattern + `)`),
		check: realBody,
	}
}

// assign declares a value found by the name beside it (a header, a field, a
// URL's userinfo). Group 1 onwards are for check.
func assign(id, desc, pattern string, check func(string, []int) bool, keywords ...string) rule {
	return rule{
		id: id, desc: desc, keywords: keywords,
		fold: true, span: defaultSpan,
		re:    later(`^(?:` + pattern + `)`),
		check: check,
	}
}

// prechecked sets pre.
func (r rule) prechecked(pre func(string) bool) rule { r.pre = pre; return r }

// valued marks a field-anchored rule whose value is the first one after
// the keyword, so the pattern may be cut where assignEnd says.
func (r rule) valued(minValue int) rule { r.bounded, r.minValue = true, minValue; return r }

// mixed additionally requires the body to hold letters and digits. It is for
// loose shapes (short prefix, open length) whose random bodies always mix
// both, so that hyphenated words like "sk-learn-compatible-..." pass.
func (r rule) mixed() rule { r.check = mixedBody; return r }

// cased additionally requires both letter cases in fair measure, for
// letter-only tokens that identifiers like "hf_AutoModelForCausalLM..."
// could otherwise mimic.
func (r rule) cased() rule { r.check = casedBody; return r }

// with replaces the check, for shapes that need more than a real body.
func (r rule) with(check func(string, []int) bool) rule { r.check = check; return r }

// glue sets glued.
func (r rule) glue() rule { r.glued = true; return r }

// spanning sets how far past the keyword the pattern may look.
func (r rule) spanning(n int) rule { r.span = n; return r }

// gated sets a cheap precondition on the text after the keyword.
func (r rule) gated(ahead func(string, int) bool) rule { r.ahead = ahead; return r }

// q is an optional quote around a field name or value, possibly escaped
// because the text is itself inside a JSON string.
const q = `\\?["']?`

// jwtPattern is three base64url segments; JSON headers always start with
// {" which encodes to eyJ.
const jwtPattern = `(eyJ[A-Za-z0-9_-]{4,})\.([A-Za-z0-9_-]{4,})\.[A-Za-z0-9_-]{16,}`

// rules is ordered most specific first: when two rules match at the same
// place (deepseek and openai both claim some "sk-" values) the earlier wins.
var rules = []rule{
	tok("anthropic-admin-api-key", "Anthropic admin API key", `sk-ant-admin\d{2}-([A-Za-z0-9_-]{32,})`, "sk-ant-").mixed(),
	tok("anthropic-api-key", "Anthropic API key", `sk-ant-[a-z]{2,8}\d{2}-([A-Za-z0-9_-]{32,})`, "sk-ant-").mixed(),
	tok("openrouter-api-key", "OpenRouter API key", `sk-or-v1-([A-Za-z0-9]{32,})`, "sk-or-").mixed(),
	tok("deepseek-api-key", "DeepSeek API key", `sk-([0-9a-f]{32})`, "sk-").mixed(),
	tok("openai-api-key", "OpenAI API key", `sk-(?:(?:proj|svcacct|admin|None)-([A-Za-z0-9_-]{20,})|([A-Za-z0-9]{20,}))`, "sk-").mixed(),
	tok("xai-api-key", "xAI API key", `xai-([A-Za-z0-9]{40,})`, "xai-").mixed(),
	tok("groq-api-key", "Groq API key", `gsk_([A-Za-z0-9]{40,})`, "gsk_").mixed(),
	tok("replicate-api-token", "Replicate API token", `r8_([A-Za-z0-9]{30,})`, "r8_").mixed(),
	tok("huggingface-access-token", "Hugging Face access token", `hf_([A-Za-z0-9]{30,40})`, "hf_").cased(),
	tok("huggingface-organization-api-token", "Hugging Face organization API token", `api_org_([A-Za-z0-9]{30,40})`, "api_org_").cased(),
	tok("pinecone-api-key", "Pinecone API key", `pcsk_([A-Za-z0-9_-]{30,})`, "pcsk_").mixed(),
	tok("runpod-api-key", "RunPod API key", `rpa?_([A-Za-z0-9]{32,})`, "rpa_", "rp_").mixed(),
	tok("vercel-token", "Vercel access token", `vc[pikar]_([A-Za-z0-9]{24,})`, "vcp_", "vci_", "vck_", "vca_", "vcr_").mixed(),
	assign("vercel-token", "Vercel access token",
		`(?:(?i:vercel[_-]?(?:api[_-]?|access[_-]?|auth[_-]?)?token)`+q+`\]?`+sepPattern+q+`|(?i:--token)(?:=|[ \t]+)`+q+`)([A-Za-z0-9]{24,})`,
		randomValue, "vercel", "--token").spanning(128).valued(24),
	assign("runpod-api-key", "RunPod API key",
		`(?i:runpod[_-]?(?:api[_-]?)?key)`+q+`\]?`+sepPattern+q+`((?:rpa_)?[A-Za-z0-9]{32,})`,
		randomValue, "runpod").spanning(160).valued(32),
	tok("perplexity-api-key", "Perplexity API key", `pplx-([A-Za-z0-9]{40,})`, "pplx-").mixed(),
	tok("linear-api-key", "Linear API key", `lin_api_([A-Za-z0-9]{32,})`, "lin_api_").mixed(),
	tok("databricks-api-token", "Databricks personal access token", `dapi([a-f0-9]{32})(?:-\d)?`, "dapi").mixed(),
	tok("digitalocean-token", "DigitalOcean token", `do[opr]_v1_([a-f0-9]{64})`, "dop_v1_", "doo_v1_", "dor_v1_").mixed(),
	tok("pypi-upload-token", "PyPI upload token", `pypi-(AgE[A-Za-z0-9_-]{50,})`, "pypi-AgE"),
	tok("vault-token", "HashiCorp Vault token", `hv[sb]\.([A-Za-z0-9_-]{24,})`, "hvs.", "hvb.").mixed(),
	tok("shopify-token", "Shopify access token or shared secret", `shp(?:at|ss|ca|pa)_([a-fA-F0-9]{32})`, "shpat_", "shpss_", "shpca_", "shppa_").mixed(),
	tok("google-oauth-client-secret", "Google OAuth client secret", `GOCSPX-([A-Za-z0-9_-]{28})`, "GOCSPX-"),
	tok("age-secret-key", "age secret key", `AGE-SECRET-KEY-1([QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58})`, "AGE-SECRET-KEY-1"),
	// A Discord bot token starts with the bot's numeric id in base64, so its
	// first two bytes are one of a few pairs.
	tok("discord-bot-token", "Discord bot token", `[MNO][A-Za-z0-9_-]{23,27}\.([A-Za-z0-9_-]{6})\.([A-Za-z0-9_-]{27,38})`,
		"MD", "MT", "Mj", "Mz", "ND", "NT", "Nj", "Nz", "OD", "OT").with(isDiscord),
	{
		id: "telegram-bot-token", desc: "Telegram bot token", keywords: []string{":AA"},
		span: 64, re: later(`^:AA([A-Za-z0-9_-]{33})`), check: isTelegram,
	},

	tok("github-pat", "GitHub personal access token", `ghp_([A-Za-z0-9]{36})`, "ghp_"),
	tok("github-oauth", "GitHub OAuth access token", `gho_([A-Za-z0-9]{36})`, "gho_"),
	tok("github-app-token", "GitHub App token", `gh[us]_([A-Za-z0-9]{36})`, "ghu_", "ghs_"),
	tok("github-refresh-token", "GitHub refresh token", `ghr_([A-Za-z0-9]{36})`, "ghr_"),
	tok("github-fine-grained-pat", "GitHub fine-grained personal access token", `github_pat_([A-Za-z0-9_]{60,})`, "github_pat_"),

	tok("gitlab-pat", "GitLab personal access token", `glpat-([A-Za-z0-9_-]{20,})`, "glpat-"),
	tok("gitlab-ptt", "GitLab pipeline trigger token", `glptt-([A-Za-z0-9_-]{20,})`, "glptt-"),
	tok("gitlab-runner-authentication-token", "GitLab runner authentication token", `glrt-([A-Za-z0-9_-]{20,})`, "glrt-"),
	tok("gitlab-deploy-token", "GitLab deploy token", `gldt-([A-Za-z0-9_-]{20,})`, "gldt-"),
	tok("gitlab-runner-registration-token", "GitLab runner registration token", `GR1348941([A-Za-z0-9_-]{20,})`, "GR1348941"),
	tok("gitlab-token", "GitLab token", `gl(?:agent|cbt|ffct|ft|imt|oas|soat)-([A-Za-z0-9_-]{20,})`,
		"glagent-", "glcbt-", "glffct-", "glft-", "glimt-", "gloas-", "glsoat-"),

	tok("supabase-access-token", "Supabase personal access token", `sbp_(?:oauth_)?([0-9a-f]{40})`, "sbp_"),
	tok("supabase-secret-key", "Supabase secret API key", `sb_secret_([A-Za-z0-9_-]{20,})`, "sb_secret_"),

	tok("stripe-secret-key", "Stripe secret key", `sk_(?:live|test)_([A-Za-z0-9]{16,})`, "sk_live_", "sk_test_").mixed(),
	tok("stripe-restricted-key", "Stripe restricted key", `rk_(?:live|test)_([A-Za-z0-9]{16,})`, "rk_live_", "rk_test_").mixed(),
	tok("stripe-webhook-secret", "Stripe webhook signing secret", `whsec_([A-Za-z0-9+/]{24,}={0,2})`, "whsec_").mixed(),

	tok("slack-bot-token", "Slack bot token", `xoxb-([0-9]{6,}-[A-Za-z0-9-]{10,})`, "xoxb-"),
	tok("slack-user-token", "Slack user token", `xoxp-([0-9]{6,}-[A-Za-z0-9-]{10,})`, "xoxp-"),
	tok("slack-app-token", "Slack app-level token", `xapp-(\d-[A-Za-z0-9-]{20,})`, "xapp-"),
	tok("slack-config-token", "Slack configuration token", `xoxe(?:\.xox[bp])?-(\d-[A-Za-z0-9-]{20,})`, "xoxe.", "xoxe-"),
	tok("slack-legacy-token", "Slack legacy or workspace token", `xox[aors]-([A-Za-z0-9-]{16,})`, "xoxa-", "xoxo-", "xoxr-", "xoxs-"),
	tok("slack-webhook-url", "Slack incoming webhook URL", `hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9+/]{20,})`, "hooks.slack.com/"),

	tok("gcp-api-key", "Google API key", `AIza([A-Za-z0-9_-]{35})`, "AIza"),
	tok("npm-access-token", "npm access token", `npm_([A-Za-z0-9]{36})`, "npm_"),
	tok("sendgrid-api-token", "SendGrid API key", `SG\.([A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43})`, "SG."),
	tok("twilio-api-key", "Twilio API key", `SK([0-9a-f]{32})`, "SK").mixed(),
	tok("twilio-account-credentials", "Twilio account SID with its auth token", `AC([0-9a-f]{32})`, "AC").with(isTwilioPair),
	tok("aws-access-key-id", "AWS access key ID", `(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)([A-Z0-9]{16})`, "A3T", "AKIA", "ASIA", "ABIA", "ACCA").with(isAWSKeyID).glue(),

	// The service-role JWT first: it is a JWT too, only worse, as it
	// bypasses Supabase row-level security.
	tok("supabase-service-role-jwt", "Supabase service-role JWT", jwtPattern, "eyJ").with(isServiceRoleJWT).spanning(8 << 10),
	tok("jwt", "JSON Web Token", jwtPattern, "eyJ").with(isJWT).spanning(8 << 10),

	// Field-anchored shapes. Case-folded keywords; the pattern itself says
	// where case matters.
	assign("private-key", "private key block",
		`-----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----((?:[^-\\]|\\.|-[^-])*)`,
		pemBody, "-----BEGIN").spanning(1 << 10),
	assign("gcp-service-account", "Google Cloud service account key",
		`private_key_id`+q+`\s*[:=]\s*`+q+`([0-9a-f]{40})`,
		isServiceAccount, "private_key_id").gated(sepAhead).spanning(128).valued(40),
	assign("aws-secret-access-key", "AWS secret access key",
		`(?i:secret[_-]?access[_-]?key|aws[_-]?secret(?:[_-]?access)?(?:[_-]?key)?)`+q+`(?:\s*(?:=>|:=|[:=])\s*|\s+)`+q+`([A-Za-z0-9/+]{40})`,
		isAWSSecret, "secret_access_key", "secret-access-key", "secretaccesskey", "aws_secret", "aws-secret", "awssecret").spanning(128).valued(40),
	assign("authorization-header", "Authorization header with a bearer token",
		`(?i:authorization)`+q+`\s*[:=,]\s*`+q+`(?i:bearer|token)\s+([A-Za-z0-9._~+/=-]{16,})`,
		isBearer, "authorization").gated(sepAhead).spanning(128),
	assign("authorization-basic", "Authorization header with Basic credentials",
		`(?i:authorization)`+q+`\s*[:=,]\s*`+q+`(?i:basic)\s+([A-Za-z0-9+/]{4,}={0,2})`,
		isBasic, "authorization").gated(sepAhead).spanning(256),
	assign("url-credentials", "URL with an inline password",
		`://([^\s:/?#"'\x60<>\\]*):([^\s/"'\x60\\]+)@[A-Za-z0-9\[]`,
		hasURLPassword, "://").gated(userinfoAhead).spanning(256),
	assign("password-assignment", "password in a connection string or config",
		`(?i:password|passwd|pwd)`+q+`([ \t]*)(:=|=|:)([ \t]*)`+
			`(?:\\?"([^"\\\r\n]+)\\?"|'([^'\r\n]+)'|([^\s;&,"'\x60()\\]+))`,
		isPasswordValue, "password", "passwd", "pwd").gated(sepAhead).spanning(256).valued(1).prechecked(notFiller),
	assign("go-mysql-dsn", "database DSN with an inline password", `@(?i:tcp6?|udp|unix)\(`, isDSN, "@tcp(", "@tcp6(", "@udp(", "@unix(").spanning(16),
	assign("azure-storage-account-key", "Azure Storage account key", `(?i:accountkey)=([A-Za-z0-9+/]{40,}={0,2})`, base64Secret, "accountkey=").spanning(160).valued(40),
	assign("azure-shared-access-key", "Azure Service Bus or Event Hubs shared access key", `(?i:sharedaccesskey)=([A-Za-z0-9+/]{30,}={0,2})`, base64Secret, "sharedaccesskey=").spanning(160).valued(30),
	assign("azure-sas-signature", "Azure shared access signature", `(?i:sig)=([A-Za-z0-9%+/]{30,})`, isSASSig, "sig=").spanning(160),
	genericRule,
}

// sepPattern is an assignment in most syntaxes: = := : => with blanks.
const sepPattern = `[ \t]*(?:=>|:=|[:=])[ \t]*`

// sepAhead reports whether a separator (: = ,) follows the keyword, after
// at most a few quotes, backslashes and blanks.
func sepAhead(s string, end int) bool {
	for j := end; j < len(s) && j < end+8; j++ {
		switch s[j] {
		case '\\', '"', '\'', ' ', '\t':
		case ':', '=', ',':
			return true
		default:
			return false
		}
	}
	return false
}

// userinfoAhead reports whether "://" is followed by userinfo: an '@' before
// the end of the authority.
func userinfoAhead(s string, end int) bool {
	for j := end; j < len(s) && j < end+defaultSpan; j++ {
		switch s[j] {
		case '@':
			return true
		case '/', ' ', '\t', '\r', '\n', '"', '\'', '`', '\\':
			return false
		}
	}
	return false
}

// firstGroup returns the first submatch that took part in the match: the
// token body, whichever alternative of the pattern produced it.
func firstGroup(s string, m []int) string {
	for i := 2; i+1 < len(m); i += 2 {
		if m[i] >= 0 {
			return s[m[i]:m[i+1]]
		}
	}
	return ""
}

// group returns submatch i, and whether it took part.
func group(s string, m []int, i int) (string, bool) {
	if 2*i+1 >= len(m) || m[2*i] < 0 {
		return "", false
	}
	return s[m[2*i]:m[2*i+1]], true
}

func realBody(s string, m []int) bool { return !fillerToken(firstGroup(s, m)) }

func mixedBody(s string, m []int) bool {
	b := firstGroup(s, m)
	c := classes(b)
	return c&(lowerClass|upperClass) != 0 && c&digitClass != 0 && !fillerToken(b)
}

func casedBody(s string, m []int) bool {
	b := firstGroup(s, m)
	up, low := 0, 0
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case 'A' <= c && c <= 'Z':
			up++
		case 'a' <= c && c <= 'z':
			low++
		}
	}
	return up*5 >= len(b) && low*5 >= len(b) && !fillerToken(b) && !camelIdent(b)
}

func isJWT(s string, m []int) bool {
	h := decodeSegment(s[m[2]:m[3]])
	if h == nil {
		return false
	}
	_, alg := h["alg"]
	_, typ := h["typ"]
	return alg || typ
}

func isServiceRoleJWT(s string, m []int) bool {
	if !isJWT(s, m) {
		return false
	}
	p := decodeSegment(s[m[4]:m[5]])
	return p != nil && p["role"] == "service_role"
}

// decodeSegment decodes one JWT segment into a JSON object, or returns nil.
func decodeSegment(seg string) map[string]any {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(seg, "="))
	if err != nil {
		return nil
	}
	var obj map[string]any
	if json.Unmarshal(b, &obj) != nil {
		return nil
	}
	return obj
}

// pemBody wants real key material after the header: a line-length run of
// base64 with a spread of symbols. A header quoted in prose, or followed by
// "..." or a placeholder, is not a leak.
func pemBody(s string, m []int) bool {
	body := s[m[2]:m[3]]
	var seen [256]bool
	distinct, run, longest := 0, 0, 0
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !isBase64(c) {
			run = 0
			continue
		}
		run++
		longest = max(longest, run)
		if !seen[c] {
			seen[c] = true
			distinct++
		}
	}
	return longest >= 40 && distinct >= 20
}

// gcpType marks a Google service-account key file; its private_key_id alone
// is just hex.
var gcpType = later(`"type\\?"\s*:\s*\\?"service_account`)

func isServiceAccount(s string, m []int) bool {
	return !fillerToken(s[m[2]:m[3]]) && gcpType().MatchString(s)
}

func isAWSSecret(s string, m []int) bool {
	v := s[m[2]:m[3]]
	if end := m[3]; end < len(s) && (isBase64(s[end]) || s[end] == '=') {
		return false // longer than 40: some other base64 blob
	}
	return !fillerToken(v) && bits(classes(v)) >= 2
}

func isBearer(s string, m []int) bool {
	v := s[m[2]:m[3]]
	return !fillerToken(v) && bits(classes(v)) >= 2
}

// isBasic accepts Basic credentials only when they decode to user:password
// with a real password; many other things are base64.
func isBasic(s string, m []int) bool {
	v := s[m[2]:m[3]]
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		if b, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(v, "=")); err != nil {
			return false
		}
	}
	if !utf8.Valid(b) || strings.ContainsFunc(string(b), func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return false
	}
	user, pass, ok := strings.Cut(string(b), ":")
	return ok && user != "" && pass != user && !placeholderPassword(pass)
}

// hasURLPassword accepts scheme://user:pass@host when the password is real.
// The pattern is anchored at "://", so the scheme is checked here, looking
// back. Equal user and password (guest:guest, postgres:postgres) are
// well-known defaults, not secrets.
func hasURLPassword(s string, m []int) bool {
	j := m[0]
	for j > 0 && isSchemeByte(s[j-1]) {
		j--
	}
	for j < m[0] && !isLetter(s[j]) {
		j++ // a scheme starts with a letter
	}
	if m[0]-j < 2 {
		return false
	}
	user, pass := s[m[2]:m[3]], s[m[4]:m[5]]
	return pass != user && !placeholderPassword(pass)
}

// isPasswordValue judges password=, pwd= and "password": "..." values.
//
// Quoted values and values glued to "=" (connection strings, .env lines) are
// taken as given. A bare value after a colon or spaced-out "=" (YAML, INI,
// but also prose and code like `password = cfg.Password`) or inside a call
// argument list must look generated: letters and digits, six or more, no
// brackets. Paths, dotted references and calls are code, not passwords.
func isPasswordValue(s string, m []int) bool {
	if c := s[m[0]+1]; (c == 'w' || c == 'W') && m[0] > 0 && isAlnum(s[m[0]-1]) {
		return false // OLDPWD=, not a pwd= parameter
	}
	for _, g := range []int{4, 5} {
		if v, ok := group(s, m, g); ok {
			return len(v) >= 4 && v == strings.TrimSpace(v) && !placeholderPassword(v)
		}
	}
	v, _ := group(s, m, 6)
	sep, _ := group(s, m, 2)
	strict := sep == ":" || m[3] > m[2] || m[7] > m[6]
	if end := m[13]; end < len(s) {
		switch c := s[end]; c {
		case ' ', '\t', '\r', '\n', '\f', '\v', ';', '&', '"', '\'', '`', '\\':
		case ',', ')':
			strict = true
		default:
			return false // a call like password=getpass(), or cut off by the span
		}
	}
	if strings.ContainsAny(v, "[]()<>") || m[13] < len(s) && (s[m[13]] == '[' || s[m[13]] == '(') {
		return false // os.environ["X"], ENV['X'], getenv("X"), a template
	}
	if placeholderPassword(v) || strings.ContainsRune("/~.", rune(v[0])) || isDottedIdent(v) {
		return false
	}
	if strict {
		if strings.ContainsAny(v, "[]{}") {
			return false // code such as row[2] or a template
		}
		c := classes(v)
		return len(v) >= 6 && c&digitClass != 0 && c&(lowerClass|upperClass) != 0
	}
	return len(v) >= 4
}

// isDottedIdent reports a reference like cfg.Password or os.environ.
func isDottedIdent(v string) bool {
	parts := strings.Split(v, ".")
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		if p == "" || !(isLetter(p[0]) || p[0] == '_') {
			return false
		}
		for i := 1; i < len(p); i++ {
			if !isAlnum(p[i]) && p[i] != '_' {
				return false
			}
		}
	}
	return true
}

// tokenFillers are what documentation and templates put where a token's
// random body belongs. They count only in lower, UPPER or Title case, so a
// random mixed-case body almost never trips one by chance (about one in 10^7
// per position for the four-letter ones).
//
// Only markers no generator produces count anywhere in the body; ordinary
// words count at its start (sk-your-key-here), so a real token whose random
// part happens to spell "fake" or "Sample" is still caught.
var tokenFillers = caseVariants("xxxx", "****", "...", "example", "placeholder", "redacted", "changeme")

var tokenPrefixFillers = caseVariants("your", "dummy", "sample", "fake", "insert", "replace", "abcdef", "123456", "000000", "test")

func caseVariants(words ...string) []string {
	var out []string
	for _, w := range words {
		out = append(out, w, strings.ToUpper(w), strings.ToUpper(w[:1])+w[1:])
	}
	return out
}

// fillerToken reports a token body that is a placeholder: it holds a filler
// word or is too repetitive to be random.
func fillerToken(b string) bool {
	for _, f := range tokenFillers {
		if strings.Contains(b, f) {
			return true
		}
	}
	for _, f := range tokenPrefixFillers {
		if strings.HasPrefix(b, f) {
			return true
		}
	}
	var seen [256]bool
	distinct := 0
	for i := 0; i < len(b) && distinct < 6; i++ {
		if !seen[b[i]] {
			seen[b[i]] = true
			distinct++
		}
	}
	return distinct < 6
}

// passwordFillers are passwords that stand for "put yours here", or are
// defaults so well known they protect nothing. Compared case-insensitively.
var passwordFillers = map[string]bool{
	"password": true, "passwd": true, "pass": true, "pwd": true, "pw": true,
	"secret": true, "changeme": true, "change_me": true, "change-me": true,
	"example": true, "placeholder": true, "redacted": true, "dummy": true,
	"test": true, "testing": true, "admin": true, "root": true, "guest": true,
	"default": true, "none": true, "null": true, "nil": true, "empty": true,
	"mypassword": true, "mysecret": true, "password123": true, "123456": true,
	"foo": true, "bar": true, "baz": true, "foobar": true,
}

// placeholderPassword reports a password that is a placeholder, so it can be
// remembered safely. The list, besides passwordFillers:
//   - one character repeated (x, xxx, ***, 000);
//   - variables and templates: $VAR, ${VAR}, $(cmd), <password>, {password},
//     [password], {{ .Password }}, %s, %(password)s;
//   - elisions: anything with "..." or "…" or "***" in it;
//   - anything starting with "your" (your-password, YOUR_PASSWORD_HERE);
//   - anything containing example, placeholder, changeme or redacted.
func placeholderPassword(v string) bool {
	v = strings.TrimSpace(v)
	if v == "" || strings.Count(v, v[:1]) == len(v) {
		return true
	}
	l := strings.ToLower(v)
	if passwordFillers[l] {
		return true
	}
	switch v[0] {
	case '$', '<', '{', '[':
		return true
	}
	if l == "%s" || strings.HasPrefix(l, "%(") || strings.HasPrefix(l, "your") {
		return true
	}
	for _, f := range []string{"{{", "...", "…", "***", "example", "placeholder", "changeme", "redacted"} {
		if strings.Contains(l, f) {
			return true
		}
	}
	return false
}

const (
	lowerClass = 1 << iota
	upperClass
	digitClass
)

// classes reports which of lower, upper and digit occur in v.
func classes(v string) int {
	c := 0
	for i := 0; i < len(v); i++ {
		switch b := v[i]; {
		case 'a' <= b && b <= 'z':
			c |= lowerClass
		case 'A' <= b && b <= 'Z':
			c |= upperClass
		case '0' <= b && b <= '9':
			c |= digitClass
		}
	}
	return c
}

func bits(c int) int { return c&1 + c>>1&1 + c>>2&1 }

func isLetter(c byte) bool     { return 'a' <= c|0x20 && c|0x20 <= 'z' }
func isAlnum(c byte) bool      { return isLetter(c) || '0' <= c && c <= '9' }
func isBase64(c byte) bool     { return isAlnum(c) || c == '+' || c == '/' }
func isSchemeByte(c byte) bool { return isAlnum(c) || c == '+' || c == '.' || c == '-' }

// isWord reports a byte that continues a token: a token next to one is part
// of some longer identifier or blob.
func isWord(c byte) bool { return isAlnum(c) || c == '_' || c == '-' }
