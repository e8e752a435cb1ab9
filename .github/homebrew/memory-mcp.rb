# Homebrew formula for memory-mcp, built from source: Go and the C
# compiler every Mac has (the SQLite driver is cgo). Install it from a tap
# (docs/install.md). Until a release is tagged there is only --HEAD; with
# one, add beside head:
#
#   url "https://github.com/OWNER/memory-mcp/archive/refs/tags/vX.Y.Z.tar.gz"
#   sha256 "<sha256 of that archive>"
class MemoryMcp < Formula
  desc "Local MCP server that gives coding agents memory across sessions"
  homepage "https://github.com/OWNER/memory-mcp"
  license "Apache-2.0"
  head "https://github.com/OWNER/memory-mcp.git", branch: "main"

  depends_on "go" => :build

  def install
    ENV["CGO_ENABLED"] = "1"
    # A source archive has no git metadata for the build to record, so the
    # version is stamped in; a HEAD build also records its commit itself.
    system "go", "build", *std_go_args(ldflags: "-s -w -X main.version=#{version}"), "./cmd/memory-mcp"
  end

  test do
    assert_match "memory-mcp #{version}", shell_output("#{bin}/memory-mcp version")
    ENV["PROMETHEUS_MEMORY_DB_PATH"] = testpath/"memory.db"
    assert_match "no memories", shell_output("#{bin}/memory-mcp list")
  end
end
