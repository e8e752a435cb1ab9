package secrets

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Every secret in these tests is generated when they run: bodies come from a
// seeded PRNG and prefixes are split, so no key-shaped literal sits in the
// source for push protection or scanners to flag.

const (
	upperChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	lowerChars = "abcdefghijklmnopqrstuvwxyz"
	digitChars = "0123456789"
	letters    = upperChars + lowerChars
	base62     = letters + digitChars
	upperAlnum = upperChars + digitChars
	hexChars   = "0123456789abcdef"
	b64url     = base62 + "-_"
	b64std     = base62 + "+/"
)

type gen struct{ r *rand.Rand }

func newGen() gen { return seededGen(2024) }

func seededGen(seed uint64) gen { return gen{rand.New(rand.NewPCG(seed, 7))} }

// str returns n random bytes of alphabet. When the alphabet has both letters
// and digits the result does too, as every real key of these shapes does.
func (g gen) str(alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[g.r.IntN(len(alphabet))]
	}
	if n >= 2 && strings.ContainsAny(alphabet, digitChars) && strings.ContainsAny(alphabet, letters) {
		b[n/3] = pick(alphabet, letters, g.r)
		b[2*n/3] = pick(alphabet, digitChars, g.r)
	}
	return string(b)
}

// pick returns a random byte of alphabet that is also in want.
func pick(alphabet, want string, r *rand.Rand) byte {
	for {
		if c := alphabet[r.IntN(len(alphabet))]; strings.IndexByte(want, c) >= 0 {
			return c
		}
	}
}

func (g gen) b64(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(g.r.UintN(256))
	}
	return base64.StdEncoding.EncodeToString(b)
}

func (g gen) jwt(payload string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc([]byte(payload)) + "." + g.str(b64url, 43)
}

func (g gen) pem(kind string) string {
	var b strings.Builder
	b.WriteString("-----BEGIN " + kind + "PRIVATE" + " KEY-----\n")
	body := g.b64(600)
	for len(body) > 64 {
		b.WriteString(body[:64] + "\n")
		body = body[64:]
	}
	b.WriteString(body + "\n-----END " + kind + "PRIVATE" + " KEY-----")
	return b.String()
}

func (g gen) pgp() string {
	return "-----BEGIN PGP " + "PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\n" +
		g.b64(300) + "\n=" + g.str(b64std, 4) + "\n-----END PGP PRIVATE KEY BLOCK-----"
}

// password returns a made-up password that is plainly not a placeholder.
func (g gen) password() string { return g.str(base62, 16) }

type positive struct {
	rule  string
	value string
}

// positives returns generated values for every rule, several shapes each.
func positives() []positive { return positivesFrom(newGen()) }

// positivesFrom is positives with bodies drawn from g.
func positivesFrom(g gen) []positive {
	var ps []positive
	add := func(rule string, values ...string) {
		for _, v := range values {
			ps = append(ps, positive{rule, v})
		}
	}
	add("anthropic-admin-api-key", "sk-ant-"+"admin01-"+g.str(b64url, 93)+"AA")
	add("anthropic-api-key", "sk-ant-"+"api03-"+g.str(b64url, 93)+"AA", "sk-ant-"+"oat01-"+g.str(b64url, 80))
	add("openrouter-api-key", "sk-or-"+"v1-"+g.str(hexChars, 64))
	add("deepseek-api-key", "sk-"+g.str(hexChars, 32))
	add("openai-api-key",
		"sk-"+"proj-"+g.str(b64url, 156),
		"sk-"+"svcacct-"+g.str(b64url, 120),
		"sk-"+"admin-"+g.str(b64url, 120),
		"sk-"+g.str(base62, 48))
	add("xai-api-key", "xai-"+g.str(base62, 80))
	add("groq-api-key", "gsk_"+g.str(base62, 52))
	add("replicate-api-token", "r8_"+g.str(base62, 37))
	add("huggingface-access-token", "hf_"+g.str(letters, 34))
	add("huggingface-organization-api-token", "api_org_"+g.str(letters, 34))
	add("pinecone-api-key", "pcsk_"+g.str(base62, 5)+"_"+g.str(base62, 64))
	add("runpod-api-key", "rpa_"+g.str(upperAlnum, 40), "rp_"+g.str(base62, 40))
	for _, p := range []string{"vcp_", "vci_", "vca_", "vcr_", "vck_"} {
		add("vercel-token", p+g.str(base62, 56))
	}
	add("github-pat", "gh"+"p_"+g.str(base62, 36))
	add("github-oauth", "gh"+"o_"+g.str(base62, 36))
	add("github-app-token", "gh"+"u_"+g.str(base62, 36), "gh"+"s_"+g.str(base62, 36))
	add("github-refresh-token", "gh"+"r_"+g.str(base62, 36))
	add("github-fine-grained-pat", "github_"+"pat_"+g.str(base62, 22)+"_"+g.str(base62, 59))
	add("gitlab-pat", "gl"+"pat-"+g.str(base62, 20), "gl"+"pat-"+g.str(b64url, 27)+".01."+g.str(base62, 9))
	add("gitlab-ptt", "gl"+"ptt-"+g.str(hexChars, 40))
	add("gitlab-runner-authentication-token", "gl"+"rt-"+g.str(base62, 20))
	add("gitlab-deploy-token", "gl"+"dt-"+g.str(base62, 20))
	add("gitlab-runner-registration-token", "GR1348"+"941"+g.str(base62, 20))
	for _, p := range []string{"glft-", "glimt-", "glagent-", "gloas-", "glsoat-", "glcbt-", "glffct-"} {
		add("gitlab-token", p+g.str(base62, 40))
	}
	add("supabase-access-token", "sb"+"p_"+g.str(hexChars, 40))
	add("supabase-secret-key", "sb_"+"secret_"+g.str(b64url, 31))
	add("supabase-service-role-jwt", g.jwt(`{"iss":"supabase","ref":"`+g.str(lowerChars, 20)+`","role":"service_role","iat":1700000000,"exp":2000000000}`))
	add("stripe-secret-key", "sk_"+"live_"+g.str(base62, 99), "sk_"+"test_"+g.str(base62, 24))
	add("stripe-restricted-key", "rk_"+"live_"+g.str(base62, 99), "rk_"+"test_"+g.str(base62, 24))
	add("stripe-webhook-secret", "wh"+"sec_"+g.str(base62, 32))
	add("slack-bot-token", "xo"+"xb-"+g.str(digitChars, 12)+"-"+g.str(digitChars, 13)+"-"+g.str(base62, 24))
	add("slack-user-token", "xo"+"xp-"+g.str(digitChars, 12)+"-"+g.str(digitChars, 12)+"-"+g.str(digitChars, 13)+"-"+g.str(hexChars, 32))
	add("slack-app-token", "xa"+"pp-1-"+g.str(upperAlnum, 11)+"-"+g.str(digitChars, 13)+"-"+g.str(hexChars, 64))
	add("slack-config-token", "xo"+"xe.xoxp-1-"+g.str(upperAlnum, 163), "xo"+"xe-1-"+g.str(upperAlnum, 146))
	add("slack-legacy-token", "xo"+"xa-2-"+g.str(base62, 30), "xo"+"xr-"+g.str(base62, 40), "xo"+"xs-"+g.str(digitChars, 10)+"-"+g.str(hexChars, 40))
	add("slack-webhook-url", "https://hooks.slack.com/services/T"+g.str(upperAlnum, 10)+"/B"+g.str(upperAlnum, 10)+"/"+g.str(base62, 24))
	add("gcp-api-key", "AI"+"za"+g.str(b64url, 35))
	add("gcp-service-account", `{"type": "service_account", "project_id": "demo", "private_key_id": "`+g.str(hexChars, 40)+`", "client_email": "x@demo.iam.gserviceaccount.com"}`)
	add("npm-access-token", "np"+"m_"+g.str(base62, 36))
	add("sendgrid-api-token", "SG"+"."+g.str(b64url, 22)+"."+g.str(b64url, 43))
	add("twilio-api-key", "S"+"K"+g.str(hexChars, 32))
	for _, p := range []string{"AKIA", "ASIA", "ABIA", "ACCA"} {
		add("aws-access-key-id", p+g.str(upperAlnum, 16))
	}
	add("aws-secret-access-key",
		"aws_secret_access_key = "+g.str(b64std, 40),
		"AWS_SECRET_ACCESS_KEY="+g.str(b64std, 40),
		"AWS_SECRET: "+g.str(b64std, 40),
		`{"AccessKeyId": "x", "SecretAccessKey": "`+g.str(b64std, 40)+`"}`)
	add("jwt", g.jwt(`{"sub":"1234567890","name":"Ada","iat":1516239022}`))
	add("private-key", g.pem("RSA "), g.pem(""), g.pem("EC "), g.pem("OPENSSH "), g.pem("ENCRYPTED "), g.pgp())
	add("authorization-header",
		"Authorization: Bearer "+g.str(base62, 40),
		"authorization: token "+g.str(hexChars, 40),
		`{"Authorization": "Bearer `+g.str(b64url, 48)+`"}`,
		`curl -H "Authorization: Bearer `+g.str(base62, 32)+`" https://api.internal`)
	add("authorization-basic", "Authorization: Basic "+base64.StdEncoding.EncodeToString([]byte("deploy:"+g.password())))
	for _, scheme := range []string{"postgres", "postgresql", "mysql", "mongodb", "mongodb+srv", "redis", "rediss", "amqp", "https", "ftp"} {
		add("url-credentials", scheme+"://app:"+g.password()+"@db.internal:5432/app")
	}
	add("url-credentials", "redis://:"+g.password()+"@cache:6379/0")
	add("password-assignment",
		"Server=db01;User Id=app;Password="+g.password()+";",
		"host=db01 dbname=app password="+g.password(),
		"Driver={ODBC};Uid=app;Pwd="+g.password()+";",
		`{"user": "app", "password": "`+g.password()+`"}`,
		"database:\n  password: "+g.password()+"\n",
		"DB_PASSWORD="+g.password())
	add("vercel-token",
		"VERCEL_TOKEN="+g.str(base62, 24),
		"vercel deploy --prod --token "+g.str(base62, 24),
		"vercel --token="+g.str(base62, 24)+" ls",
		`{"vercelToken": "`+g.str(base62, 24)+`"}`)
	add("runpod-api-key", "RUNPOD_API_KEY="+g.str(upperAlnum, 32), "runpod_api_key: rpa_"+g.str(upperAlnum, 40), "rpa_"+g.str(upperAlnum, 46))
	add("perplexity-api-key", "pp"+"lx-"+g.str(base62, 48), "pp"+"lx-"+g.str(base62, 48), "pp"+"lx-"+g.str(base62, 56))
	add("linear-api-key", "lin_"+"api_"+g.str(base62, 40), "lin_"+"api_"+g.str(base62, 40), "lin_"+"api_"+g.str(base62, 48))
	add("databricks-api-token", "da"+"pi"+g.str(hexChars, 32), "da"+"pi"+g.str(hexChars, 32)+"-2", "da"+"pi"+g.str(hexChars, 32))
	add("digitalocean-token", "do"+"p_v1_"+g.str(hexChars, 64), "do"+"o_v1_"+g.str(hexChars, 64), "do"+"r_v1_"+g.str(hexChars, 64))
	add("pypi-upload-token", "py"+"pi-AgEIcHlwaS5vcmc"+g.str(b64url, 70), "py"+"pi-AgENdGVzdC5weXBpLm9yZw"+g.str(b64url, 90), "py"+"pi-AgE"+g.str(b64url, 150))
	add("vault-token", "hv"+"s."+g.str(b64url, 24), "hv"+"s.CAESI"+g.str(b64url, 90), "hv"+"b."+g.str(b64url, 138))
	add("shopify-token", "shp"+"at_"+g.str(hexChars, 32), "shp"+"ss_"+g.str(hexChars, 32), "shp"+"ca_"+g.str(hexChars, 32))
	discord := func() string {
		id := fmt.Sprint(100000000000000000 + g.r.Int64N(900000000000000000))
		return base64.RawURLEncoding.EncodeToString([]byte(id)) + "." + g.str(b64url, 6) + "." + g.str(b64url, 38)
	}
	add("discord-bot-token", discord(), discord(), "DISCORD_BOT_TOKEN="+discord())
	telegram := func() string { return fmt.Sprint(100000000+g.r.IntN(900000000)) + ":AA" + g.str(b64url, 33) }
	add("telegram-bot-token", telegram(), "TELEGRAM_BOT_TOKEN="+telegram(), "https://api.telegram.org/bot"+telegram()+"/getMe")
	add("twilio-account-credentials",
		"TWILIO_ACCOUNT_SID=A"+"C"+g.str(hexChars, 32)+"\nTWILIO_AUTH_TOKEN="+g.str(hexChars, 32),
		`client = Client("A`+`C`+g.str(hexChars, 32)+`", "`+g.str(hexChars, 32)+`")`,
		"sid A"+"C"+g.str(hexChars, 32)+" token "+g.str(hexChars, 32))
	add("google-oauth-client-secret", "GOC"+"SPX-"+g.str(b64url, 28), "GOC"+"SPX-"+g.str(b64url, 28), "GOC"+"SPX-"+g.str(b64url, 28))
	add("slack-bot-token",
		"xo"+"xb-"+g.str(digitChars, 12)+"-"+g.str(digitChars, 13)+"-"+g.str(base62, 8)+"fake"+g.str(base62, 12),
		"xo"+"xb-"+g.str(digitChars, 11)+"-"+g.str(digitChars, 13)+"-"+g.str(base62, 4)+"Sample"+g.str(base62, 14))
	add("slack-app-token", "xa"+"pp-1-"+g.str(upperAlnum, 11)+"-"+g.str(digitChars, 13)+"-"+g.str(hexChars, 20)+"your"+g.str(hexChars, 40))
	age := func() string { return "AGE-SECRET-" + "KEY-1" + g.str("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58) }
	add("age-secret-key", age(), "# created: 2024\n# public key: age1"+g.str("qpzry9x8gf2tvdw0s3jn54khce6mua7l", 58)+"\n"+age(), age())
	azureKey := func(n int) string { return g.b64(n) }
	add("azure-storage-account-key",
		"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey="+azureKey(64)+";EndpointSuffix=core.windows.net",
		"AccountKey="+azureKey(64), "accountkey="+azureKey(64))
	add("azure-shared-access-key",
		"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey="+azureKey(32),
		"SharedAccessKey="+azureKey(32)+";EntityPath=q", "sharedaccesskey="+azureKey(32))
	sas := func() string {
		return strings.NewReplacer("+", "%2B", "/", "%2F", "=", "%3D").Replace(azureKey(32))
	}
	add("azure-sas-signature",
		"https://acct.blob.core.windows.net/c/b.txt?sv=2022-11-02&ss=b&srt=o&sp=r&se=2030-01-01T00:00:00Z&sig="+sas(),
		"?sp=racwdl&st=2024-01-01&se=2025-01-01&spr=https&sv=2022-11-02&sr=c&sig="+sas(),
		"SharedAccessSignature=sv=2022-11-02&ss=b&sig="+sas())
	add("go-mysql-dsn", "app:"+g.password()+"@tcp(db:3306)/app?parseTime=true", "root:"+g.password()+"@tcp(127.0.0.1:3306)/", "user:"+g.password()+"@unix(/var/run/mysqld.sock)/db")
	for _, scheme := range []string{"amqps", "smtp", "smtps", "ldap", "sftp", "ssh", "mssql", "sqlserver", "clickhouse", "nats", "kafka", "mqtt", "jdbc:postgresql", "snowflake", "neo4j+s", "couchbase", "git+https", "s3"} {
		add("url-credentials", scheme+"://svc:"+g.password()+"@host.internal/x")
	}
	add("url-credentials", "smtp://alerts@corp.example.org:"+g.password()+"@smtp.gmail.com:587")
	add("private-key",
		"-----BEGIN RSA "+"PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,"+strings.ToUpper(g.str(hexChars, 32))+"\n\n"+g.b64(400)+"\n-----END RSA PRIVATE KEY-----",
		"tls:\n  key: |\n    -----BEGIN EC "+"PRIVATE KEY-----\n    "+g.b64(48)+"\n    "+g.b64(48)+"\n    -----END EC PRIVATE KEY-----\n")
	add("generic-secret-assignment",
		"client_secret: "+g.str(b64url, 40),
		"SECRET_KEY = '"+g.str(base62+"!@#%^&*(-_=+)", 50)+"'",
		`api_key="`+g.str(base62, 32)+`"`,
		`{"client_secret": "`+g.str(base62, 32)+`"}`,
		"[auth]\napi_key = \""+g.str(base62, 32)+"\"\n",
		"export API_TOKEN="+g.str(base62, 40),
		"MY_SERVICE_SECRET="+g.str(hexChars, 64),
		`const apiKey = "`+g.str(base62, 32)+`"`,
		`apiKey := "`+g.str(base62, 32)+`"`,
		`self.auth_token = '`+g.str(base62, 32)+`'`,
		"signing_key: "+g.str(b64std, 44),
		"webhook_secret => '"+g.str(base62, 24)+"'",
		`config.access_token = "`+g.str(letters, 30)+`"`)
	return ps
}

// contexts are the places a secret shows up in a memory.
var contexts = []struct {
	name string
	wrap func(string) string
}{
	{"bare", func(v string) string { return v }},
	{"period", func(v string) string { return "it is " + v + "." }},
	{"comma", func(v string) string { return "(" + v + "), then" }},
	{"quotes", func(v string) string { return `token "` + v + `" here` }},
	{"json", func(v string) string { return `{"value": ` + jsonString(v) + `, "n": 1}` }},
	{"yaml", func(v string) string { return "config:\n  value: " + v + "\n  next: 1\n" }},
	{"env", func(v string) string { return "# settings\nSECRET_VALUE=" + v + "\nOTHER=1\n" }},
	{"backticks", func(v string) string { return "set it to `" + v + "` first" }},
	{"fenced", func(v string) string { return "Example:\n\n```sh\n" + v + "\n```\n" }},
}

// jsonString quotes v as JSON does, newlines escaped and all.
func jsonString(v string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func TestScanPositives(t *testing.T) {
	for _, p := range positives() {
		for _, c := range contexts {
			in := c.wrap(p.value)
			f, ok := Scan(in)
			if c.name == "env" && f.Rule == "generic-secret-assignment" {
				continue // caught under the secret-named field around it
			}
			if !ok || f.Rule != p.rule {
				t.Errorf("%s/%s: Scan = %q, %v; want %q\ninput: %q", p.rule, c.name, f.Rule, ok, p.rule, in)
			}
		}
	}
}

func TestEveryRuleExercised(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range positives() {
		seen[p.rule] = true
	}
	for _, id := range Rules() {
		if !seen[id] {
			t.Errorf("rule %q has no positive case", id)
		}
	}
	for id := range seen {
		if !slices.Contains(Rules(), id) {
			t.Errorf("positive case for unknown rule %q", id)
		}
	}
}

func TestRules(t *testing.T) {
	ids := Rules()
	if !slices.IsSorted(ids) {
		t.Errorf("Rules() not sorted: %q", ids)
	}
	if len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Errorf("Rules() has duplicates: %q", ids)
	}
	for _, r := range rules {
		if r.id == "" || r.desc == "" || len(r.keywords) == 0 || r.re == nil || r.span <= 0 {
			t.Errorf("rule %q is incomplete", r.id)
		}
	}
}

// TestEveryPatternCompiles compiles each rule's pattern, which the
// scanner otherwise does only when a keyword first needs it, and checks
// that each is anchored: the scanner runs it at a keyword's offset.
func TestEveryPatternCompiles(t *testing.T) {
	for _, r := range rules {
		func() {
			defer func() {
				if v := recover(); v != nil {
					t.Errorf("rule %q: %v", r.id, v)
				}
			}()
			re := r.re()
			if !strings.HasPrefix(re.String(), "^") {
				t.Errorf("rule %q: pattern %q is not anchored", r.id, re.String())
			}
			if re != r.re() {
				t.Errorf("rule %q: pattern compiled twice", r.id)
			}
		}()
	}
	for _, re := range []func() *regexp.Regexp{gcpType, sasParam} {
		if re() == nil {
			t.Error("a check's pattern is missing")
		}
	}
}

// TestFirstUseFromManyGoroutines: several scans at once, each the first to
// need the pattern of the rule they hit (-race checks the compiling).
func TestFirstUseFromManyGoroutines(t *testing.T) {
	var wg sync.WaitGroup
	text := "token: gh" + "p_" + newGen().str(base62, 36)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if f, ok := Scan(text); !ok || f.Rule != "github-pat" {
				t.Errorf("Scan = %v, %v; want github-pat", f, ok)
			}
		}()
	}
	wg.Wait()
}

func TestScanNegatives(t *testing.T) {
	g := newGen()
	uuid := func() string {
		h := g.str(hexChars, 32)
		return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:]
	}
	cases := map[string]string{
		"prose key":      "Rotate the API key every 90 days and keep it in the vault.",
		"prose password": "The password must be 12 chars, with one digit. Password: see 1Password.",
		"prose secret":   "Never commit an AWS secret access key; the private key stays on the laptop.",
		"prose header":   "Send the token in the Authorization header as a Bearer token.",
		"prose tasks":    "Ask about task-management-and-scheduling-overview and the risk-assessment-framework-document.",
		"go code": `func connect(cfg Config) (*sql.DB, error) {
	password := os.Getenv("DB_PASSWORD")
	req.Header.Set("Authorization", "Bearer "+token)
	dsn := fmt.Sprintf("postgres://%s:%s@%s/%s", cfg.User, password, cfg.Host, cfg.Name)
	return sql.Open("pgx", dsn)
}`,
		"python code":    "conn = psycopg2.connect(host=h, password=pw)\nclient = OpenAI(api_key=os.environ[\"OPENAI_API_KEY\"])\n",
		"password call":  "password=getpass.getpass()",
		"password ref":   "password = cfg.Password",
		"password path":  "PWD=/home/dev/app\nOLDPWD=/home/dev",
		"password word":  "password: required",
		"password types": "interface Login { password: string; }\nclass Form(BaseModel):\n    password: Optional[str] = None\n",
		"password code":  "Password: os.Getenv(\"DB_PASSWORD\"),\npassword: process.env.DB_PASSWORD,\npassword: row[2],\npassword: z.string().min(8)",
		"uuid":           uuid() + " " + strings.ToUpper(uuid()),
		"git sha":        "commit " + g.str(hexChars, 40) + " (HEAD -> main)",
		"sha256":         "sha256:" + g.str(hexChars, 64),
		"sha512":         g.str(hexChars, 128) + "  release.tar.gz",
		"go.sum":         "github.com/google/uuid v1.3.0 h1:" + g.b64(32) + "\ngithub.com/google/uuid v1.3.0/go.mod h1:" + g.b64(32) + "\n",
		"npm integrity":  `"integrity": "sha512-` + g.b64(64) + `"`,
		"url no creds":   "postgres://localhost:5432/db and https://user@host/ and https://example.com:8443/a?b=c#d",
		"ssh url":        "git clone ssh://git@github.com:22/org/repo.git; git@github.com:org/repo.git",
		"data uri":       "![logo](data:image/png;base64," + g.b64(6000) + ")",
		"sk dots":        "OPENAI_API_KEY=sk-...",
		"sk xxxx":        "OPENAI_API_KEY=sk-xxxx",
		"sk long xxxx":   "OPENAI_API_KEY=sk-proj-" + strings.Repeat("x", 48),
		"sk your key":    "OPENAI_API_KEY=sk-your-openai-api-key-here",
		"sk words":       "pip install sk-learn-compatible-estimator-toolkit",
		"angle token":    "GITHUB_TOKEN=<YOUR_TOKEN>",
		"xxxx":           "API_KEY=xxxx",
		"env ref":        "API_KEY=${API_KEY} TOKEN=$TOKEN",
		"changeme":       "SECRET=changeme",
		"your key":       "api_key: your-api-key-here",
		"ghp xs":         "gh" + "p_" + strings.Repeat("x", 36),
		"ghp example":    "gh" + "p_" + "EXAMPLE" + g.str(base62, 29),
		"aws docs":       "AKIA" + "IOSFODNN7EXAMPLE",
		"aws docs key":   "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY",
		"aws long blob":  "aws_secret_access_key_hash = " + g.str(b64std, 60),
		"aws lc id":      "akia" + g.str(lowerChars, 16),
		"glued token":    "xghp_" + g.str(base62, 36) + " and gh" + "p_" + g.str(base62, 40),
		"bearer var":     `curl -H "Authorization: Bearer $TOKEN" -H 'Authorization: Bearer <token>'`,
		"bearer words":   "Authorization: Bearer your-access-token-here",
		"basic default":  "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("user:password")),
		"basic junk":     "Authorization: Basic " + g.b64(30),
		"pw placeholder": "password=<password>; pwd=${DB_PASS}; password=changeme; password=******; password=your-password-here",
		"pw json ph":     `{"password": "${DB_PASSWORD}", "pwd": "", "passwd": null}`,
		"url ph":         "postgres://user:password@localhost/db mongodb://admin:<password>@cluster0.example.net redis://:changeme@localhost:6379 mysql://root:${MYSQL_PASSWORD}@db/app",
		"url foo bar":    "curl https://foo:bar@example.com/",
		"url default":    "amqp://guest:guest@localhost:5672/ postgres://postgres:postgres@localhost:5432/postgres",
		"pem elided":     "-----BEGIN " + "PRIVATE KEY-----\n...\n-----END PRIVATE KEY-----",
		"pem prose":      "A PKCS#8 file starts with -----BEGIN " + "PRIVATE KEY----- and is followed by base64 lines of sixty four characters each, until the END line.",
		"pem public":     "-----BEGIN PUBLIC KEY-----\n" + g.b64(200) + "\n-----END PUBLIC KEY-----",
		"jwt junk":       "eyJ" + g.str(b64url, 30) + "." + g.str(b64url, 30) + "." + g.str(b64url, 30),
		"slack docs":     "https://hooks.slack.com/services/T00000000/B00000000/" + strings.Repeat("X", 24),
		"gcp no type":    `{"private_key_id": "` + g.str(hexChars, 40) + `"}`,
		"twilio sid":     "AC" + g.str(hexChars, 32),
		"hf identifier":  "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",
		"empty":          "",
		"one byte":       "s",
	}
	for name, in := range cases {
		if f, ok := Scan(in); ok {
			t.Errorf("%s: Scan = %q, want no finding\ninput: %q", name, f.Rule, in)
		}
	}
}

func TestScanFirst(t *testing.T) {
	g := newGen()
	in := "first npm_" + g.str(base62, 36) + " then gh" + "p_" + g.str(base62, 36)
	if f, _ := Scan(in); f.Rule != "npm-access-token" {
		t.Errorf("Scan = %q, want the earlier npm-access-token", f.Rule)
	}
	// A placeholder must not hide a real token right after it.
	in = "sk-xxxx gh" + "p_" + strings.Repeat("x", 36) + " gh" + "p_" + g.str(base62, 36)
	if f, _ := Scan(in); f.Rule != "github-pat" {
		t.Errorf("Scan = %q, want github-pat after the placeholders", f.Rule)
	}
}

// ruleTable maps each id to its description, the only Finding values Scan
// may return.
func ruleTable() map[string]string {
	m := map[string]string{}
	for _, r := range rules {
		m[r.id] = r.desc
	}
	return m
}

func FuzzScan(f *testing.F) {
	for i, p := range positives() {
		if i%3 == 0 {
			f.Add(p.value)
		}
	}
	for _, s := range []string{
		"", "sk-", "password=", "Authorization: Bearer ", "postgres://u:p@h", "eyJ.eyJ.x",
		"-----BEGIN PRIVATE KEY-----\n", "AKIA", "\\nghp_", "rotate the API key every 90 days",
	} {
		f.Add(s)
	}
	table := ruleTable()
	var tt strings.Builder
	for id, desc := range table {
		tt.WriteString(id + "\x00" + desc + "\n")
	}
	tableText := tt.String()
	f.Fuzz(func(t *testing.T, s string) {
		f1, ok1 := Scan(s)
		f2, ok2 := Scan(s)
		if f1 != f2 || ok1 != ok2 {
			t.Fatalf("Scan not deterministic: %v,%v then %v,%v", f1, ok1, f2, ok2)
		}
		if !ok1 {
			if f1 != (Finding{}) {
				t.Fatalf("no finding but Finding = %+v", f1)
			}
			return
		}
		// Both fields come from the fixed table, so no input can leak
		// through them.
		if desc, known := table[f1.Rule]; !known || desc != f1.Description {
			t.Fatalf("Finding %+v is not a rule table entry", f1)
		}
		// And no piece of the input is in the finding unless the table
		// itself holds it.
		out := f1.Rule + "\x00" + f1.Description
		for i := 0; i+4 <= len(out); i++ {
			if w := out[i : i+4]; strings.Contains(s, w) && !strings.Contains(tableText, w) {
				t.Fatalf("Finding %+v holds %q from the input", f1, w)
			}
		}
	})
}

// cleanText is about 10 KB of ordinary memory content: prose that talks
// about keys and passwords, code, URLs without credentials, hashes.
func cleanText() string {
	g := newGen()
	var b strings.Builder
	for b.Len() < 10<<10 {
		fmt.Fprintf(&b, "Rotate the API key every 90 days; the password must be 12 chars. "+
			"Set the Authorization header from the environment, never inline.\n"+
			"See https://docs.example.com/guide and postgres://localhost:5432/app for setup.\n"+
			"```go\nfunc handler(w http.ResponseWriter, r *http.Request) {\n"+
			"\ttoken := r.Header.Get(\"Authorization\")\n\tif err := check(token); err != nil {\n"+
			"\t\thttp.Error(w, err.Error(), http.StatusUnauthorized)\n\t\treturn\n\t}\n}\n```\n"+
			"commit %s fixed the task-scheduler risk in SKU lookups; id %s.\n",
			g.str(hexChars, 40), g.str(hexChars, 32))
	}
	return b.String()[:10<<10]
}

func BenchmarkScan(b *testing.B) {
	clean := cleanText()
	g := newGen()
	dirty := clean[:len(clean)-100] + "\nexport GITHUB_TOKEN=gh" + "p_" + g.str(base62, 36) + "\n"
	for _, bc := range []struct {
		name string
		in   string
		want bool
	}{
		{"clean-10KB", clean, false},
		{"secret-at-end-10KB", dirty, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if _, ok := Scan(bc.in); ok != bc.want {
				b.Fatalf("Scan ok = %v, want %v", ok, bc.want)
			}
			b.SetBytes(int64(len(bc.in)))
			b.ReportAllocs()
			for b.Loop() {
				Scan(bc.in)
			}
		})
	}
}
