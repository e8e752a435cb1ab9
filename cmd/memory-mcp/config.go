package main

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"prom.codes/memory-mcp/cmd/memory-mcp/internal/dburl"
	"prom.codes/memory-mcp/memory"
	"prom.codes/memory-mcp/scope"
	"prom.codes/memory-mcp/weave"
)

// Config is everything the environment decides.
type Config struct {
	DBPath        string         // PROMETHEUS_MEMORY_DB_PATH, else ~/.prometheus/memory.db; "" on PostgreSQL
	DBURL         string         // PROMETHEUS_MEMORY_DB_URL: a postgres:// URL, which wins over DBPath
	Root          string         // PROMETHEUS_WORKSPACE_ROOT, else the git top-level, else the working directory
	Project       scope.Identity // hash of Root
	TokenBudget   int            // PROMETHEUS_MEMORY_TOKEN_BUDGET, default 1500
	Confirmations int            // PROMETHEUS_MEMORY_CONFIRMATIONS, default 2
	LogLevel      slog.Level     // PROMETHEUS_MEMORY_LOG_LEVEL: debug, info, warn, error

	// The embeddings endpoint, for semantic search: PROMETHEUS_MEMORY_EMBEDDINGS_URL,
	// _MODEL and _KEY. Without a URL nothing is sent anywhere.
	EmbeddingsURL, EmbeddingsModel, EmbeddingsKey string
}

func loadConfig(getenv func(string) string) (Config, error) {
	c := Config{TokenBudget: weave.DefaultMaxTokens, Confirmations: 2, LogLevel: slog.LevelInfo}
	if v := strings.TrimSpace(getenv("PROMETHEUS_MEMORY_DB_URL")); v != "" {
		if err := dburl.Check(v); err != nil {
			return c, fmt.Errorf("PROMETHEUS_MEMORY_DB_URL: %w", err)
		}
		c.DBURL = v
	} else {
		c.DBPath = getenv("PROMETHEUS_MEMORY_DB_PATH")
		if strings.Contains(c.DBPath, "://") {
			return c, errors.New("PROMETHEUS_MEMORY_DB_PATH is a URL: it names a SQLite file; put a postgres:// URL in PROMETHEUS_MEMORY_DB_URL")
		}
		if c.DBPath == "" {
			p, err := memory.DefaultPath()
			if err != nil {
				return c, err
			}
			c.DBPath = p
		}
	}
	root, err := scope.Root(getenv("PROMETHEUS_WORKSPACE_ROOT"), "")
	if err != nil {
		return c, err
	}
	c.Root, c.Project = root, scope.IdentityOf(root)
	if v := getenv("PROMETHEUS_MEMORY_TOKEN_BUDGET"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return c, fmt.Errorf("PROMETHEUS_MEMORY_TOKEN_BUDGET=%q: want a positive whole number of tokens", v)
		}
		c.TokenBudget = n
	}
	if v := getenv("PROMETHEUS_MEMORY_CONFIRMATIONS"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return c, fmt.Errorf("PROMETHEUS_MEMORY_CONFIRMATIONS=%q: want a positive whole number of sessions", v)
		}
		c.Confirmations = n
	}
	if v := getenv("PROMETHEUS_MEMORY_LOG_LEVEL"); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			return c, fmt.Errorf("PROMETHEUS_MEMORY_LOG_LEVEL=%q: want debug, info, warn or error", v)
		}
	}
	if c.EmbeddingsURL = strings.TrimSpace(getenv("PROMETHEUS_MEMORY_EMBEDDINGS_URL")); c.EmbeddingsURL != "" {
		c.EmbeddingsModel = strings.TrimSpace(getenv("PROMETHEUS_MEMORY_EMBEDDINGS_MODEL"))
		c.EmbeddingsKey = strings.TrimSpace(getenv("PROMETHEUS_MEMORY_EMBEDDINGS_KEY"))
	}
	return c, nil
}

// redact takes the database URL's password out of err's text.
func (c Config) redact(err error) error { return dburl.Redact(err, dburl.Secrets(c.DBURL)) }
