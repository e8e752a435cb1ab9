package secrets

import (
	"encoding/base64"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The corpus measures the scanner as a whole: recall over every rule's
// generated positives in every context, and the share of ordinary text it
// refuses. Secrets are generated here, never read from disk; the files under
// testdata/negatives are ordinary code and prose only.

const (
	corpusSeeds = 12   // rounds of freshly generated positives
	minRecall   = 0.99 // per rule and overall
	maxFPRate   = 0.01
)

func TestCorpusRecall(t *testing.T) {
	type tally struct{ n, caught, named int }
	per := map[string]*tally{}
	for seed := range uint64(corpusSeeds) {
		for _, p := range positivesFrom(seededGen(1000 + seed)) {
			for _, c := range contexts {
				tl := per[p.rule]
				if tl == nil {
					tl = &tally{}
					per[p.rule] = tl
				}
				tl.n++
				f, ok := Scan(c.wrap(p.value))
				if ok {
					tl.caught++
				}
				if f.Rule == p.rule {
					tl.named++
				}
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-36s %9s %7s %7s %7s\n", "rule", "positives", "caught", "named", "recall")
	total, caught := 0, 0
	for _, id := range Rules() {
		tl := per[id]
		if tl == nil {
			t.Errorf("rule %s: no positives", id)
			continue
		}
		r := float64(tl.caught) / float64(tl.n)
		fmt.Fprintf(&b, "%-36s %9d %7d %7d %7.4f\n", id, tl.n, tl.caught, tl.named, r)
		total += tl.n
		caught += tl.caught
		if r < minRecall {
			t.Errorf("rule %s: recall %.4f < %.2f", id, r, minRecall)
		}
	}
	overall := float64(caught) / float64(total)
	fmt.Fprintf(&b, "%-36s %9d %7d %7s %7.4f\n", "all", total, caught, "", overall)
	t.Log(b.String())
	if overall < minRecall {
		t.Errorf("overall recall %.4f < %.2f", overall, minRecall)
	}
}

// hardNegatives are, per rule, inputs that look like its shape and must be
// accepted: references, placeholders, identifiers, documented examples.
func hardNegatives() map[string][]string {
	g := newGen()
	x := func(n int) string { return strings.Repeat("x", n) }
	return map[string][]string{
		"anthropic-admin-api-key":            {"sk-ant-" + "admin01-...", "ANTHROPIC_ADMIN_KEY=sk-ant-admin01-" + x(40)},
		"anthropic-api-key":                  {"ANTHROPIC_API_KEY=sk-ant-...", "sk-ant-" + "api03-" + x(90)},
		"openrouter-api-key":                 {"sk-or-" + "v1-...", "sk-or-v1-" + x(64)},
		"deepseek-api-key":                   {"sk-" + strings.Repeat("0", 32), "DEEPSEEK_API_KEY=sk-<key>"},
		"openai-api-key":                     {"OPENAI_API_KEY=sk-...", "sk-learn-compatible-estimator-toolkit", "pip install sk-video-toolkit-extra"},
		"xai-api-key":                        {"xai-" + x(80), "XAI_API_KEY=xai-your-key-here"},
		"groq-api-key":                       {"gsk_" + x(52), "GROQ_API_KEY=gsk_..."},
		"replicate-api-token":                {"r8_" + x(37), "REPLICATE_API_TOKEN=r8_****"},
		"huggingface-access-token":           {"hf_AutoModelForCausalLM", "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", "hf_" + x(34)},
		"huggingface-organization-api-token": {"api_org_" + x(34), "api_org_ExampleOrganizationTokenName"},
		"pinecone-api-key":                   {"pcsk_" + x(60), "PINECONE_API_KEY=pcsk_..."},
		"runpod-api-key":                     {"RUNPOD_API_KEY=${RUNPOD_API_KEY}", "runpod_api_key = os.environ[\"RUNPOD_API_KEY\"]", "rpa_" + x(40)},
		"vercel-token":                       {"vercel --token $VERCEL_TOKEN", "VERCEL_TOKEN=<YOUR_TOKEN>", "vercel deploy --token \"${VERCEL_TOKEN}\""},
		"perplexity-api-key":                 {"pplx-" + x(48), "PERPLEXITY_API_KEY=pplx-..."},
		"linear-api-key":                     {"lin_api_" + x(40), "lin_api_key_name"},
		"databricks-api-token":               {"dapi" + strings.Repeat("0", 32), "databricks dapi endpoint"},
		"digitalocean-token":                 {"dop_v1_" + x(64), "DIGITALOCEAN_TOKEN=dop_v1_..."},
		"pypi-upload-token":                  {"pypi-AgE...", "TWINE_PASSWORD=pypi-<token>"},
		"vault-token":                        {"hvs." + x(24), "VAULT_TOKEN=hvs.example"},
		"shopify-token":                      {"shpat_" + x(32), "SHOPIFY_TOKEN=shpat_..."},
		"google-oauth-client-secret":         {"GOCSPX-" + x(28), "GOOGLE_CLIENT_SECRET=GOCSPX-..."},
		"age-secret-key":                     {"AGE-SECRET-KEY-1...", "age -d -i key.txt secrets.age"},
		"discord-bot-token":                  {"MTIzNDU2.abc.def", "NT" + g.str(b64url, 22) + "." + g.str(b64url, 6) + "." + g.str(b64url, 30)},
		"telegram-bot-token":                 {"123456789:AA" + x(33), "at 12:AA" + g.str(b64url, 33)},
		"twilio-account-credentials":         {"TWILIO_ACCOUNT_SID=AC" + g.str(hexChars, 32), "AC" + strings.Repeat("0", 32) + " " + g.str(hexChars, 32)},
		"twilio-api-key":                     {"SK" + x(32), "SKU-" + g.str(hexChars, 32)},
		"age-secret-key-prose":               {"An age identity begins with AGE-SECRET-KEY-1 and is bech32."},
		"slack-bot-token":                    {"xoxb-your-token", "SLACK_BOT_TOKEN=xoxb-" + x(40)},
		"slack-app-token":                    {"xapp-...", "SLACK_APP_TOKEN=xapp-1-" + x(40)},
		"slack-user-token":                   {"xoxp-...", "xoxp-" + x(40)},
		"slack-config-token":                 {"xoxe-...", "xoxe.xoxp-..."},
		"slack-legacy-token":                 {"xoxs-...", "xoxa-" + x(30)},
		"slack-webhook-url":                  {"https://hooks.slack.com/services/T00000000/B00000000/" + strings.Repeat("X", 24), "https://hooks.slack.com/services/..."},
		"azure-storage-account-key":          {"AccountKey=" + x(88), "AccountKey=${STORAGE_KEY};AccountName=acct"},
		"azure-shared-access-key":            {"SharedAccessKey=<key>", "SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=..."},
		"azure-sas-signature":                {"https://acct.blob.core.windows.net/c?sig=<signature>", "the sig= parameter carries the signature"},
		"go-mysql-dsn":                       {`fmt.Sprintf("%s:%s@tcp(%s)/%s", user, pass, host, db)`, "root:@tcp(127.0.0.1:3306)/test", "user:password@tcp(localhost:3306)/db"},
		"url-credentials":                    {"https://example.com:8443/a?b=c", "amqp://guest:guest@localhost:5672/", "smtp://user:<password>@smtp.example.com", "redis://localhost:6379"},
		"private-key":                        {"-----BEGIN " + "PRIVATE KEY-----\n...\n-----END PRIVATE KEY-----", "-----BEGIN PUBLIC KEY-----\n" + g.b64(200) + "\n-----END PUBLIC KEY-----"},
		"generic-secret-assignment": {
			`password=os.environ["X"]`, `config['db']['password']`, `request.form['password']`, `params[:password]`, `ENV['X']`,
			`SECRET_KEY = os.environ.get("SECRET_KEY")`, `api_key = os.getenv("OPENAI_API_KEY")`, `client_secret: ${CLIENT_SECRET}`,
			`secretName: my-tls-secret-2024`, `const tokenKey = "authTokenStorageKey"`, `"token_hash": "` + g.str(hexChars, 64) + `"`,
			`api_key: "<YOUR_API_KEY>"`, `token = jwt.encode(payload, SECRET_KEY, algorithm="HS256")`,
		},
		"aws-access-key-id":                  {"AKIA" + "IOSFODNN7EXAMPLE", "ASIAPACIFICSOUTHEAST", "region ASIAPACIFICNORTHERN"},
		"aws-secret-access-key":              {"aws_secret_access_key = $AWS_SECRET_ACCESS_KEY", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY"},
		"password-assignment":                {`password=os.environ["X"]`, `password = ENV['DB_PASSWORD']`, "password: ${DB_PASSWORD}"},
		"authorization-header":               {"Authorization: Bearer $TOKEN", "Authorization: Bearer <token>"},
		"authorization-basic":                {"Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("user:password")), "Authorization: Basic $CREDS"},
		"jwt":                                {"eyJ" + g.str(b64url, 30) + "." + g.str(b64url, 30) + "." + g.str(b64url, 30), "eyJhbGciOi..."},
		"supabase-service-role-jwt":          {"SUPABASE_SERVICE_ROLE_KEY=eyJ...", "service_role"},
		"gcp-service-account":                {`{"private_key_id": "` + g.str(hexChars, 40) + `"}`, `"type": "service_account"`},
		"gcp-api-key":                        {"AIza" + x(35), "GOOGLE_API_KEY=AIza..."},
		"npm-access-token":                   {"npm_" + x(36), "npm_config_registry"},
		"sendgrid-api-token":                 {"SG." + x(22) + "." + x(43), "SG.example"},
		"github-pat":                         {"gh" + "p_" + x(36), "gh" + "p_" + "EXAMPLE" + g.str(base62, 29)},
		"github-oauth":                       {"gh" + "o_" + x(36), "GITHUB_OAUTH=gho_..."},
		"github-app-token":                   {"gh" + "s_" + x(36), "ghu_..."},
		"github-refresh-token":               {"gh" + "r_" + x(36), "ghr_..."},
		"github-fine-grained-pat":            {"github_pat_" + x(82), "github_pat_..."},
		"gitlab-pat":                         {"glpat-" + x(20), "GITLAB_TOKEN=glpat-..."},
		"gitlab-ptt":                         {"glptt-" + x(40), "glptt-..."},
		"gitlab-runner-authentication-token": {"glrt-" + x(20), "glrt-..."},
		"gitlab-deploy-token":                {"gldt-" + x(20), "gldt-..."},
		"gitlab-runner-registration-token":   {"GR1348941" + x(20), "GR1348941..."},
		"gitlab-token":                       {"glft-" + x(40), "glimt-..."},
		"supabase-access-token":              {"sbp_" + strings.Repeat("0", 40), "sbp_..."},
		"supabase-secret-key":                {"sb_secret_" + x(31), "sb_secret_..."},
		"stripe-secret-key":                  {"sk_live_" + x(24), "STRIPE_SECRET_KEY=sk_test_..."},
		"stripe-restricted-key":              {"rk_live_" + x(24), "rk_test_..."},
		"stripe-webhook-secret":              {"whsec_" + x(32), "whsec_..."},
	}
}

func TestHardNegatives(t *testing.T) {
	negs := hardNegatives()
	for _, id := range Rules() {
		if len(negs[id]) < 2 {
			t.Errorf("rule %s: %d hard negatives, want at least 2", id, len(negs[id]))
		}
	}
	for id, ins := range negs {
		for _, in := range ins {
			if f, ok := Scan(in); ok {
				t.Errorf("%s: Scan = %q, want no finding\ninput: %q", id, f.Rule, in)
			}
		}
	}
}

// ordinaryText returns samples of ordinary code and prose: the handwritten
// snippets under testdata/negatives (split on "----" lines) and every Go
// source file of this module cut into 30-line pieces.
func ordinaryText(t testing.TB) []string {
	var out []string
	files, err := filepath.Glob(filepath.Join("testdata", "negatives", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("read negatives: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("read negatives: %v", err)
		}
		for _, part := range strings.Split(string(b), "\n----\n") {
			out = append(out, part)
		}
	}
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != ".." || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() && path == filepath.Join("..", "secrets") {
			return filepath.SkipDir // its tests build secrets on purpose
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		lines := strings.Split(string(b), "\n")
		for len(lines) > 0 {
			n := min(30, len(lines))
			out = append(out, strings.Join(lines[:n], "\n"))
			lines = lines[n:]
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk module sources: %v", err)
	}
	return out
}

func TestFalsePositiveRate(t *testing.T) {
	samples := ordinaryText(t)
	var hits []string
	byRule := map[string]int{}
	for _, s := range samples {
		if f, ok := Scan(s); ok {
			byRule[f.Rule]++
			if len(hits) < 20 {
				hits = append(hits, fmt.Sprintf("%s in %q", f.Rule, s))
			}
		}
	}
	n := 0
	for _, k := range byRule {
		n += k
	}
	rate := float64(n) / float64(len(samples))
	t.Logf("false positives: %d of %d samples (%.4f)", n, len(samples), rate)
	for _, id := range slices.Sorted(mapsKeys(byRule)) {
		t.Logf("  %s: %d", id, byRule[id])
	}
	for _, h := range hits {
		t.Log(h)
	}
	if rate > maxFPRate {
		t.Errorf("false-positive rate %.4f > %.2f", rate, maxFPRate)
	}
	if len(samples) < 500 {
		t.Errorf("only %d ordinary samples; the rate means little", len(samples))
	}
}

func mapsKeys(m map[string]int) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
