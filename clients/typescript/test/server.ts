/** Starts and stops cowkvd processes for the tests. */
import { ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import * as readline from "node:readline";

/** $COWKVD or ../../bazel-bin/server/cowkvd (relative to clients/typescript), or undefined. */
export function serverBinary(): string | undefined {
  const bin = process.env.COWKVD || path.resolve(__dirname, "../../../../bazel-bin/server/cowkvd");
  return fs.existsSync(bin) ? path.resolve(bin) : undefined;
}

const tempDirs: string[] = [];
process.once("exit", () => {
  for (const d of tempDirs) fs.rmSync(d, { recursive: true, force: true });
});

/** A fresh directory under the system temp dir, removed when the test process exits. */
export function tempDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), "cowkv-ts-"));
  tempDirs.push(d);
  return d;
}

export class Server {
  readonly device: string;
  readonly args: string[];
  addr = "";
  private proc?: ChildProcess;
  private exited?: Promise<void>;
  private paused = false;

  constructor(readonly bin: string, readonly dir: string, size: string, token = "", extra: string[] = []) {
    this.device = path.join(dir, "cowkv.img");
    this.args = ["--device", this.device, "--create-size", size, "--listen", "127.0.0.1:0", "--metrics-listen", "", ...extra];
    if (token) {
      const f = path.join(dir, "token");
      fs.writeFileSync(f, token + "\n", { mode: 0o600 });
      this.args.push("--auth-token-file", f);
    }
  }

  /** Starts cowkvd and resolves once it prints its port. */
  async start(): Promise<void> {
    const proc = spawn(this.bin, this.args, { stdio: ["ignore", "ignore", "pipe"] });
    this.proc = proc;
    this.exited = new Promise((resolve) => proc.once("exit", () => resolve()));
    const lines = readline.createInterface({ input: proc.stderr! });
    const log: string[] = [];
    this.addr = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("cowkvd did not start in 60 s")), 60000);
      lines.on("line", (line) => {
        const m = /\(port (\d+)\)/.exec(line);
        if (m) {
          clearTimeout(timer);
          resolve(`127.0.0.1:${m[1]}`);
        } else {
          log.push(line);
          if (process.env.COWKV_VERBOSE) console.error(`cowkvd: ${line}`);
        }
      });
      proc.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`cowkvd exited at start (${code}): ${log.join("\n")}`));
      });
    });
  }

  /**
   * SIGSTOP, and waits until every thread is stopped (/proc/PID/task/TID/stat
   * state T): the signal is asynchronous, and a thread still running could answer.
   */
  async pause(): Promise<void> {
    const pid = this.proc!.pid!;
    this.paused = true;
    this.proc!.kill("SIGSTOP");
    const end = Date.now() + 10000;
    for (;;) {
      const states: string[] = [];
      for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
        try {
          const stat = fs.readFileSync(`/proc/${pid}/task/${task}/stat`, "utf8");
          states.push(stat.slice(stat.lastIndexOf(")") + 1).trim().split(/\s+/)[0]);
        } catch {
          // a thread that just ended
        }
      }
      if (states.length > 0 && states.every((s) => s === "T" || s === "t")) return;
      if (Date.now() > end) throw new Error(`cowkvd ${pid} not stopped 10 s after SIGSTOP: ${states}`);
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  /** SIGCONT: runs a paused server again. */
  resume(): void {
    this.proc?.kill("SIGCONT");
    this.paused = false;
  }

  /** SIGTERM (after SIGCONT if paused), then waits for the exit (SIGKILL after 30 s). */
  async stop(): Promise<void> {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    if (this.paused) this.resume();
    this.proc = undefined;
    proc.kill("SIGTERM");
    const t = setTimeout(() => proc.kill("SIGKILL"), 30000);
    await this.exited;
    clearTimeout(t);
  }
}

/** An address where nothing listens (a free port, found and released). */
export async function deadAddress(): Promise<string> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(`127.0.0.1:${port}`));
    });
  });
}
