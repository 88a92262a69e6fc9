/**
 * A TCP proxy in front of PostgreSQL that reads the wire protocol, so a test can cut,
 * reset, black-hole or delay a connection at a chosen statement (issue 27): the
 * transaction's connection as its completion is sent, its COMMIT's reply lost, a renewal
 * held 150 ms, every connection of a receiver gone silent after the handler's INSERT.
 *
 * Like the fault suite's `startProxy` (test/faults/harness/processes.ts), `blackhole()`
 * stops forwarding on every connection without closing anything (new connections are
 * accepted and held) and `heal()` lets everything through again; on top of that,
 * `arm(rule)` fires a fault on the connection that sends a statement matching
 * `rule.match`:
 * - `when: 'before'` (default): the statement does not reach the server;
 * - `when: 'after'`: the statement is forwarded and executed, and the fault takes the
 *   server's whole reply (up to its ReadyForQuery): COMMIT done, its answer lost.
 * Faults: `reset` (both sockets reset: the server ends the session, rolling its
 * transaction back; the client sees ECONNRESET), `blackhole` (this connection goes
 * silent both ways, nothing closed: the server keeps the session, also when the client
 * closes its side meanwhile, until `heal()`), `blackhole-all`
 * (every connection, as `blackhole()`), `{ delayMs }` (the statement is held that long,
 * then forwarded; before only).
 *
 * The protocol, as far as read here: the client's first message (startup, SSLRequest,
 * CancelRequest) has no type byte; every other message is a type byte and an int32
 * length that counts itself. SQL travels in 'Q' (simple query: the text) and 'P' (Parse:
 * a statement name, then the text); 'B', 'D', 'E', 'S' follow a 'P' without text. The
 * server's 'K' (BackendKeyData) carries the backend's process id, its 'Z'
 * (ReadyForQuery) ends each reply.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export type PgFault = 'reset' | 'blackhole' | 'blackhole-all' | { delayMs: number };

export interface PgFaultRule {
  /** The statement's SQL text (a 'Q' or a 'P' message). */
  match: RegExp;
  fault: PgFault;
  /** Before the statement reaches the server (default), or once the server answered it. */
  when?: 'before' | 'after';
  /** How many matching statements fire it (default 1). */
  times?: number;
}

/** A rule that fired: the statement, the proxy's connection number, the backend's process id. */
export interface PgFaultHit {
  sql: string;
  connection: number;
  pid: number | undefined;
}

export interface PgStatement {
  connection: number;
  sql: string;
  at: number;
}

export interface PgProxy {
  /** The database URL with the proxy's port. */
  url: string;
  /** Fires `rule.fault` at the matching statement; resolves when it fired (the last time, with `times`). */
  arm(rule: PgFaultRule): Promise<PgFaultHit>;
  /** Every statement clients sent through the proxy, in order. */
  readonly statements: PgStatement[];
  /** Stops forwarding on every connection, closing nothing; new connections are held. */
  blackhole(): void;
  /** Forwards again: what was held goes through, in order. */
  heal(): void;
  close(): Promise<void>;
}

const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;

/** One side's byte stream cut into messages. */
class Frames {
  private buffer: Buffer = Buffer.alloc(0);
  constructor(
    /** The next message has no type byte (the client's startup). */
    public untyped: boolean,
  ) {}

  /** Bytes that need no framing (the server's one-byte answer to SSLRequest). */
  single = false;

  push(chunk: Buffer): Array<{ type: string | undefined; raw: Buffer }> {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    const out: Array<{ type: string | undefined; raw: Buffer }> = [];
    for (;;) {
      if (this.single) {
        if (this.buffer.length < 1) break;
        this.single = false;
        out.push({ type: undefined, raw: this.buffer.subarray(0, 1) });
        this.buffer = this.buffer.subarray(1);
        continue;
      }
      const head = this.untyped ? 0 : 1;
      if (this.buffer.length < head + 4) break;
      const length = this.buffer.readInt32BE(head);
      if (this.buffer.length < head + length) break;
      const raw = this.buffer.subarray(0, head + length);
      this.buffer = this.buffer.subarray(head + length);
      out.push({ type: this.untyped ? undefined : String.fromCharCode(raw[0]!), raw });
    }
    return out;
  }
}

/** The SQL a client message carries, if any. */
function sqlOf(type: string | undefined, raw: Buffer): string | undefined {
  if (type === 'Q') return raw.toString('utf8', 5, raw.indexOf(0, 5));
  if (type === 'P') {
    const nameEnd = raw.indexOf(0, 5);
    return raw.toString('utf8', nameEnd + 1, raw.indexOf(0, nameEnd + 1));
  }
  return undefined;
}

interface Armed {
  rule: PgFaultRule;
  left: number;
  resolve(hit: PgFaultHit): void;
}

export async function startPgProxy(databaseUrl: string): Promise<PgProxy> {
  const address = new URL(databaseUrl);
  const target = { host: address.hostname, port: Number(address.port || 5432) };
  const rules: Armed[] = [];
  const statements: PgStatement[] = [];
  const conns = new Set<Conn>();
  let holed = false;
  let next = 0;

  /** One client connection and its link to the server. */
  class Conn {
    readonly id = ++next;
    pid: number | undefined;
    upstream: Socket | undefined;
    private readonly fromClient = new Frames(true);
    private readonly fromServer = new Frames(false);
    /** Messages not forwarded yet, per direction. */
    private readonly toServer: Buffer[] = [];
    private readonly toClient: Buffer[] = [];
    /** This connection alone is black-holed, or its statements held for a delay. */
    private silent = false;
    private delayed = false;
    /** An 'after' rule waiting for the server's reply to its statement. */
    private after: { armed: Armed; hit: PgFaultHit } | undefined;
    /** Past an SSL answer 'S': encrypted, forwarded as bytes. */
    private opaque = false;
    private dead = false;
    /** A side closed while the link was silent: the other is closed once it is healed. */
    private gone = false;

    constructor(readonly client: Socket) {}

    link(): void {
      const upstream = connect(target.port, target.host);
      this.upstream = upstream;
      upstream.on('data', (chunk: Buffer) => this.fromUpstream(chunk));
      upstream.on('error', () => this.closed());
      upstream.on('close', () => this.closed());
      this.pump();
    }

    /**
     * One side closed. Through a silent link the other side never learns it (as behind a
     * link that drops packets: the server keeps the session); it does once healed.
     */
    closed(): void {
      if (this.blocked() && this.upstream !== undefined) this.gone = true;
      else this.kill(false);
    }

    private blocked(): boolean {
      return holed || this.silent || this.upstream === undefined;
    }

    fromDownstream(chunk: Buffer): void {
      if (this.dead) return;
      if (this.opaque) return void this.queue(this.toServer, chunk);
      for (const { type, raw } of this.fromClient.push(chunk)) {
        if (type === undefined) {
          const code = raw.length >= 8 ? raw.readInt32BE(4) : 0;
          // After an SSL or GSS request the server answers one byte, and the startup follows.
          if (code === SSL_REQUEST || code === GSSENC_REQUEST) this.fromServer.single = true;
          else this.fromClient.untyped = false;
        }
        const sql = sqlOf(type, raw);
        if (sql !== undefined) {
          statements.push({ connection: this.id, sql, at: Date.now() });
          const armed = rules.find((r) => r.left > 0 && r.rule.match.test(sql));
          if (armed !== undefined) {
            armed.left--;
            const hit = { sql, connection: this.id, pid: this.pid };
            if (armed.rule.when === 'after') this.after = { armed, hit };
            else this.fire(armed, hit);
          }
        }
        if (this.dead) return;
        this.queue(this.toServer, raw);
      }
    }

    private fromUpstream(chunk: Buffer): void {
      if (this.dead) return;
      if (this.opaque) return void this.queue(this.toClient, chunk);
      for (const { type, raw } of this.fromServer.push(chunk)) {
        if (type === undefined && raw[0] === 0x53) this.opaque = true;
        if (type === 'K' && raw.length >= 9) this.pid = raw.readInt32BE(5);
        if (this.after !== undefined) {
          // The reply to the statement of an 'after' rule: withheld until it is whole, then the fault takes it.
          this.toClient.push(raw);
          if (type === 'Z') {
            const { armed, hit } = this.after;
            this.after = undefined;
            this.fire(armed, hit);
          }
          continue;
        }
        this.queue(this.toClient, raw);
      }
    }

    private fire(armed: Armed, hit: PgFaultHit): void {
      const { fault } = armed.rule;
      if (armed.left === 0) armed.resolve(hit);
      if (fault === 'reset') return this.kill(true);
      if (fault === 'blackhole') {
        this.silent = true;
        this.client.pause();
        this.upstream?.pause();
        return;
      }
      if (fault === 'blackhole-all') return proxy.blackhole();
      // A delay: what comes next waits behind the statement.
      this.delayed = true;
      setTimeout(() => {
        this.delayed = false;
        this.pump();
      }, fault.delayMs);
    }

    private queue(into: Buffer[], raw: Buffer): void {
      into.push(raw);
      this.pump();
    }

    /** Forwards what waits, unless this connection is held. */
    pump(): void {
      if (this.dead || this.blocked()) return;
      if (!this.delayed) for (const b of this.toServer.splice(0)) this.upstream!.write(b);
      if (this.after === undefined) for (const b of this.toClient.splice(0)) this.client.write(b);
    }

    pause(): void {
      this.client.pause();
      this.upstream?.pause();
    }

    resume(): void {
      this.silent = false;
      if (this.gone) return this.kill(false);
      this.client.resume();
      this.upstream?.resume();
      if (this.upstream === undefined && !this.dead) this.link();
      else this.pump();
    }

    kill(reset: boolean): void {
      if (this.dead) return;
      this.dead = true;
      conns.delete(this);
      for (const s of [this.client, this.upstream]) {
        if (s === undefined) continue;
        if (reset && typeof s.resetAndDestroy === 'function' && !s.connecting) s.resetAndDestroy();
        else s.destroy();
      }
    }
  }

  const server: Server = createServer((client) => {
    const conn = new Conn(client);
    conns.add(conn);
    client.on('data', (chunk: Buffer) => conn.fromDownstream(chunk));
    client.on('error', () => conn.closed());
    client.on('close', () => conn.closed());
    if (holed) client.pause();
    else conn.link();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  address.port = String((server.address() as { port: number }).port);

  const proxy: PgProxy = {
    url: address.toString(),
    statements,
    arm(rule) {
      return new Promise<PgFaultHit>((resolve) => {
        if (rule.when === 'after' && typeof rule.fault === 'object')
          throw new TypeError('a delay holds a statement before it is sent');
        rules.push({ rule, left: rule.times ?? 1, resolve });
      });
    },
    blackhole() {
      holed = true;
      for (const c of conns) c.pause();
    },
    heal() {
      holed = false;
      for (const c of conns) c.resume();
    },
    async close() {
      for (const c of conns) c.kill(false);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return proxy;
}
