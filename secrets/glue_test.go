package secrets

import "testing"

// TestAWSKeyGluedToWords finds an AWS key id that '-' or '_' glue to the
// words around it, as a slug, a tag or a file name does, and still leaves
// one inside a longer alphanumeric run alone.
func TestAWSKeyGluedToWords(t *testing.T) {
	key := "AKIA" + "Q7WZ3MNB5XRT2PLK"
	for _, s := range []string{"prod-" + key, "prod_" + key, key + "-backup", "deploy with prod-" + key + "_east today"} {
		if f, ok := Scan(s); !ok || f.Rule != "aws-access-key-id" {
			t.Errorf("Scan(%q) = %v, %v; want aws-access-key-id", s, f, ok)
		}
	}
	for _, s := range []string{"prod" + key, key + "9", "task-sk-" + "abc"} {
		if f, ok := Scan(s); ok {
			t.Errorf("Scan(%q) = %v; want nothing", s, f)
		}
	}
}
