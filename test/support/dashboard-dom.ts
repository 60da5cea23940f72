import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, before, beforeEach } from 'node:test';
import { pathToFileURL } from 'node:url';

/**
 * The dashboard's Preact components (web/src) rendered in Node, without a browser: a DOM just large enough for
 * Preact 11 ({@link FakeDocument}), the components bundled with their own copy of Preact by esbuild (the transform
 * Vite applies, web/vite.config.ts), and a `fetch` whose answers the test gives one by one ({@link holdRequests}), so a
 * test decides the order in which overlapping reads answer. For what only a browser shows (layout, focus, the live
 * stream) the Chromium suites (test/dashboard/browser*.test.ts) remain.
 */

const ROOT = resolve(import.meta.dirname, '../..');

/** A node of {@link FakeDocument}: its children and its place among its siblings. */
export class FakeNode {
  readonly childNodes: FakeNode[] = [];
  parentNode: FakeNode | null = null;

  constructor(
    readonly ownerDocument: FakeDocument,
    readonly nodeType: number,
  ) {}

  get firstChild(): FakeNode | null {
    return this.childNodes[0] ?? null;
  }

  get nextSibling(): FakeNode | null {
    const siblings = this.parentNode?.childNodes ?? [];
    return siblings[siblings.indexOf(this) + 1] ?? null;
  }

  /** Puts `node` before `before` (at the end when null), taking it from where it was. */
  insertBefore(node: FakeNode, before: FakeNode | null): FakeNode {
    node.remove();
    const at = before === null ? -1 : this.childNodes.indexOf(before);
    if (at < 0) this.childNodes.push(node);
    else this.childNodes.splice(at, 0, node);
    node.parentNode = this;
    return node;
  }

  appendChild(node: FakeNode): FakeNode {
    return this.insertBefore(node, null);
  }

  removeChild(node: FakeNode): FakeNode {
    node.remove();
    return node;
  }

  remove(): void {
    const parent = this.parentNode;
    if (parent === null) return;
    parent.childNodes.splice(parent.childNodes.indexOf(this), 1);
    this.parentNode = null;
  }

  /** The text of the node and its descendants, joined. */
  get textContent(): string {
    return this.childNodes.map((child) => child.textContent).join('');
  }
}

/** A text node. */
export class FakeText extends FakeNode {
  constructor(
    ownerDocument: FakeDocument,
    public data: string,
  ) {
    super(ownerDocument, 3);
  }

  override get textContent(): string {
    return this.data;
  }
}

/** What a listener of {@link FakeElement} gets: the event's type and target, and a `preventDefault` that does nothing. */
export interface FakeEvent {
  type: string;
  target: FakeElement;
  currentTarget: FakeElement;
  preventDefault(): void;
}

/**
 * An element: attributes, listeners, and the properties Preact sets as such (`value`, `checked`, `disabled`,
 * `tabIndex`, `style`); anything else Preact sets as an attribute.
 */
export class FakeElement extends FakeNode {
  readonly attributes = new Map<string, string>();
  readonly listeners = new Map<string, ((event: FakeEvent) => unknown)[]>();
  readonly namespaceURI = 'http://www.w3.org/1999/xhtml';
  style: Record<string, unknown> = { setProperty() {}, cssText: '' };
  value = '';
  checked = false;
  disabled = false;
  tabIndex = -1;

  constructor(
    ownerDocument: FakeDocument,
    readonly localName: string,
  ) {
    super(ownerDocument, 1);
  }

  get nodeName(): string {
    return this.localName.toUpperCase();
  }

  setAttribute(name: string, value: unknown): void {
    this.attributes.set(name, String(value));
  }

  removeAttribute(name: string): void {
    this.attributes.delete(name);
  }

  getAttribute(name: string): string | null {
    return this.attributes.get(name) ?? null;
  }

  addEventListener(type: string, listener: (event: FakeEvent) => unknown): void {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), listener]);
  }

  removeEventListener(type: string, listener: (event: FakeEvent) => unknown): void {
    this.listeners.set(
      type,
      (this.listeners.get(type) ?? []).filter((l) => l !== listener),
    );
  }

  /**
   * What a user's action does: sets `change` on the element (`{ value }` of a select, `{ checked }` of a checkbox),
   * then calls its `type` listeners (`change`, `click`, `submit`). Events do not bubble.
   */
  dispatch(type: string, change: Partial<Pick<FakeElement, 'value' | 'checked'>> = {}): void {
    Object.assign(this, change);
    const event: FakeEvent = { type, target: this, currentTarget: this, preventDefault() {} };
    for (const listener of this.listeners.get(type) ?? []) listener.call(this, event);
  }

  /** A `<dialog>`'s `showModal` (web/src/ui.tsx `ConfirmButton`): does nothing, its content is always rendered. */
  showModal(): void {}

  /** A `<dialog>`'s `close`: does nothing. */
  close(): void {}

  /** The descendant elements for which `predicate` holds, in document order. */
  all(predicate: (element: FakeElement) => boolean): FakeElement[] {
    const found: FakeElement[] = [];
    const walk = (node: FakeNode) => {
      for (const child of node.childNodes) {
        if (!(child instanceof FakeElement)) continue;
        if (predicate(child)) found.push(child);
        walk(child);
      }
    };
    walk(this);
    return found;
  }

  /** The one descendant for which `predicate` holds. @throws Error naming `what` when there is none or several. */
  one(what: string, predicate: (element: FakeElement) => boolean): FakeElement {
    const [first, ...rest] = this.all(predicate);
    if (first === undefined || rest.length > 0)
      throw new Error(`${rest.length + (first ? 1 : 0)} elements: ${what}`);
    return first;
  }
}

/** The document Preact creates nodes with. */
export class FakeDocument {
  createElement(name: string): FakeElement {
    return new FakeElement(this, name);
  }

  createElementNS(_namespace: string, name: string): FakeElement {
    return new FakeElement(this, name);
  }

  createTextNode(text: string): FakeText {
    return new FakeText(this, text);
  }
}

/** The global slots the pages use: `document`, and `window` and `getComputedStyle` (the health charts). */
const globals = globalThis as { document?: unknown; window?: unknown; getComputedStyle?: unknown };

/**
 * Makes a new {@link FakeDocument} the global `document` (Preact creates nodes with it), with a `window` whose
 * listeners are never called and a `getComputedStyle` answering no colours (what the health charts read before they
 * draw, web/src/pages/health.tsx). → the document, and `restore`, which puts back what was there.
 */
export function installDocument(): { document: FakeDocument; restore: () => void } {
  const before = { document: globals.document, window: globals.window, style: globals.getComputedStyle };
  const document = new FakeDocument();
  globals.document = document;
  globals.window = { addEventListener: () => undefined, removeEventListener: () => undefined };
  globals.getComputedStyle = () => ({ color: '', getPropertyValue: () => '' });
  return {
    document,
    restore: () => {
      globals.document = before.document;
      globals.window = before.window;
      globals.getComputedStyle = before.style;
    },
  };
}

/**
 * A server-sent events stream the page opened (web/src/pages/instance.tsx's live stream), which the test drives:
 * `open()` calls `onopen`, `push(name, data)` delivers the event `name` with `data` as JSON, as the server sends it.
 */
export class FakeEventSource {
  onopen: (() => void) | null = null;
  onerror: (() => void) | null = null;
  closed = false;
  readonly listeners = new Map<string, ((event: { data: string }) => void)[]>();

  constructor(readonly url: string) {}

  addEventListener(name: string, listener: (event: { data: string }) => void): void {
    this.listeners.set(name, [...(this.listeners.get(name) ?? []), listener]);
  }

  close(): void {
    this.closed = true;
  }

  /** The stream is open: calls `onopen`. */
  open(): void {
    this.onopen?.();
  }

  /** The server sends the event `name` with `data` (JSON). @throws Error when the page closed the stream. */
  push(name: string, data: unknown): void {
    if (this.closed) throw new Error(`the stream ${this.url} is closed`);
    for (const listener of this.listeners.get(name) ?? []) listener({ data: JSON.stringify(data) });
  }
}

/**
 * Makes {@link FakeEventSource} the global `EventSource`. → every stream the pages opened, in order, and `restore`,
 * which puts back what was there.
 */
export function installEventSources(): { sources: FakeEventSource[]; restore: () => void } {
  const slot = globalThis as { EventSource?: unknown };
  const before = slot.EventSource;
  const sources: FakeEventSource[] = [];
  slot.EventSource = class extends FakeEventSource {
    constructor(url: string) {
      super(url);
      sources.push(this);
    }
  };
  return {
    sources,
    restore: () => {
      slot.EventSource = before;
    },
  };
}

/** The signed-in user the pages take (web/src/api.ts `Me`). */
export interface MeProps {
  user: { id: string; email: string; role: 'owner' | 'member' | 'viewer' };
  org: { id: string; name: string; plan: string };
  csrfToken: string;
  expiresAt: string;
}

/** The props of web/src/pages/delivery-log.tsx `DeliveryLog` (kept in step with it by hand). */
export interface DeliveryLogProps {
  path: string;
  caption: string;
  attribute: 'delivery' | 'endpoint-delivery';
  types: readonly string[];
  canManage: boolean;
  version: number;
}

/** The props of web/src/pages/event-log.tsx `EventLogPanel`. */
export interface EventLogPanelProps {
  id: string;
  version: number;
}

/** The props of web/src/pages/conversations.tsx `ConversationsPanel`. */
export interface ConversationsPanelProps {
  id: string;
  canManage: boolean;
  version: number;
}

/** The props of web/src/pages/health.tsx `HealthPanel`. */
export interface HealthPanelProps {
  instanceId?: string;
  names?: Record<string, string>;
  version?: number;
}

/** The props of web/src/pages/endpoints.tsx `EndpointsPanel`. */
export interface EndpointsPanelProps {
  id: string;
  canManage: boolean;
  version: number;
}

/** The props of web/src/pages/instance.tsx `InstancePage`. */
export interface InstancePageProps {
  me: MeProps;
  id: string;
}

/** The props of web/src/pages/profile.tsx `ProfilePanel` and `BlocklistPanel`. */
export interface ProfilePanelProps {
  id: string;
  canManage: boolean;
}

/** The props of web/src/pages/webhook.tsx `WebhookPanel`. */
export interface WebhookPanelProps {
  id: string;
  canManage: boolean;
  version: number;
}

/** The props of the pages of the whole organization (instances, keys, users). */
export interface OrgPageProps {
  me: MeProps;
}

/** A component of the bundle, seen from the tests: what props it takes (Preact's own types stay out of test/). */
export type PageComponent<P> = (props: P) => unknown;

/** An element `h` made, handed back to `render`. */
export interface PageElement {
  readonly props: unknown;
}

/**
 * The bundle: Preact's `h`, `render` and test-utils `act`, and the components, all sharing one Preact. Typed here
 * by hand: Preact's declarations bring in the DOM's global types, which the server's type-check must not see.
 */
export interface DashboardPages {
  /** Preact's `h`: an element of `component` with `props`. */
  h<P>(component: PageComponent<P>, props: P): PageElement;
  /** Preact's `render`: renders `element` into `root` (null unmounts what is there). */
  render(element: PageElement | null, root: FakeElement): void;
  /** preact/test-utils `act`: runs `step`, awaits it, then runs every render and effect it caused. */
  act(step: () => void | Promise<void>): Promise<void>;
  DeliveryLog: PageComponent<DeliveryLogProps>;
  EventLogPanel: PageComponent<EventLogPanelProps>;
  ConversationsPanel: PageComponent<ConversationsPanelProps>;
  HealthPanel: PageComponent<HealthPanelProps>;
  EndpointsPanel: PageComponent<EndpointsPanelProps>;
  InstancePage: PageComponent<InstancePageProps>;
  ProfilePanel: PageComponent<ProfilePanelProps>;
  BlocklistPanel: PageComponent<ProfilePanelProps>;
  WebhookPanel: PageComponent<WebhookPanelProps>;
  InstancesPage: PageComponent<OrgPageProps>;
  KeysPage: PageComponent<OrgPageProps>;
  UsersPage: PageComponent<OrgPageProps>;
  UsagePage: PageComponent<Record<string, never>>;
}

/**
 * What the bundle imports for `uplot`: a chart that draws nothing (uPlot draws on a canvas, which the fake DOM has
 * not), so the health panel's text (its totals) is what a test reads.
 */
const UPLOT_STUB = [
  'export default class uPlot {',
  '  static paths = { stepped: () => null };',
  '  setSize() {}',
  '  destroy() {}',
  '}',
].join('\n');

let bundled: Promise<DashboardPages> | undefined;

/**
 * The dashboard's pages as the browser runs them: web/src bundled by esbuild with Preact's automatic JSX runtime (as
 * web/vite.config.ts builds it) into a temporary module of this process, imported once per process.
 * @throws Error with esbuild's messages when the bundle fails.
 */
export function dashboardPages(): Promise<DashboardPages> {
  bundled ??= (async () => {
    const { build } = await import('esbuild');
    const result = await build({
      stdin: {
        contents: [
          "export { h, render } from 'preact';",
          "export { act } from 'preact/test-utils';",
          "export { DeliveryLog } from './web/src/pages/delivery-log.tsx';",
          "export { EventLogPanel } from './web/src/pages/event-log.tsx';",
          "export { ConversationsPanel } from './web/src/pages/conversations.tsx';",
          "export { HealthPanel } from './web/src/pages/health.tsx';",
          "export { EndpointsPanel } from './web/src/pages/endpoints.tsx';",
          "export { InstancePage } from './web/src/pages/instance.tsx';",
          "export { BlocklistPanel, ProfilePanel } from './web/src/pages/profile.tsx';",
          "export { WebhookPanel } from './web/src/pages/webhook.tsx';",
          "export { InstancesPage } from './web/src/pages/instances.tsx';",
          "export { KeysPage } from './web/src/pages/keys.tsx';",
          "export { UsersPage } from './web/src/pages/users.tsx';",
          "export { UsagePage } from './web/src/pages/usage.tsx';",
        ].join('\n'),
        resolveDir: ROOT,
        sourcefile: 'dashboard-pages.ts',
        loader: 'ts',
      },
      bundle: true,
      write: false,
      format: 'esm',
      platform: 'browser',
      target: 'es2022',
      jsx: 'automatic',
      jsxImportSource: 'preact',
      loader: { '.css': 'empty' },
      plugins: [
        {
          name: 'uplot-stub',
          setup(plugin) {
            plugin.onResolve({ filter: /^uplot$/ }, () => ({ path: 'uplot', namespace: 'uplot-stub' }));
            plugin.onLoad({ filter: /.*/, namespace: 'uplot-stub' }, () => ({
              contents: UPLOT_STUB,
              loader: 'js',
            }));
          },
        },
      ],
      logLevel: 'silent',
    });
    const [output] = result.outputFiles;
    if (output === undefined) throw new Error('esbuild wrote no bundle of the dashboard pages');
    const file = join(mkdtempSync(join(tmpdir(), 'parley-dashboard-pages-')), 'pages.mjs');
    writeFileSync(file, output.contents);
    return (await import(pathToFileURL(file).href)) as DashboardPages;
  })();
  return bundled;
}

/** One request of the dashboard held by {@link holdRequests} until the test answers it. */
export interface HeldRequest {
  method: string;
  /** The URL as the page asked for it (`/dashboard/api/…`). */
  url: string;
  /** Its query parameters. */
  query: URLSearchParams;
  /** Answers 200 with parley's envelope around `data`. */
  answer(data: unknown): void;
  /** Answers `status` with parley's error envelope. */
  fail(status: number, message: string): void;
}

/**
 * Replaces the global `fetch` with one that holds every request until the test answers it, each answer a settled
 * promise (no body stream), so what the page does with it is done once the microtasks have run
 * ({@link settle}). → the requests in the order they were made, and `restore`.
 */
export function holdRequests(): { requests: HeldRequest[]; restore: () => void } {
  const before = globalThis.fetch;
  const requests: HeldRequest[] = [];
  globalThis.fetch = ((input: string | URL | Request, init?: RequestInit) =>
    new Promise<Response>((answered) => {
      const url = String(input);
      const reply = (status: number, body: unknown) =>
        answered({
          ok: status >= 200 && status < 300,
          status,
          json: () => Promise.resolve(body),
        } as unknown as Response);
      requests.push({
        method: init?.method ?? 'GET',
        url,
        query: new URL(url, 'http://dashboard.test').searchParams,
        answer: (data) => reply(200, { success: true, code: 200, data }),
        fail: (status, message) => reply(status, { error: { code: status, message } }),
      });
    })) as typeof fetch;
  return {
    requests,
    restore: () => {
      globalThis.fetch = before;
    },
  };
}

/** Waits until every microtask queued so far, and those they queue, has run: an answered read has been applied. */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** What a page test works with: see {@link pageHarness}. */
export interface PageHarness {
  /** The bundle (set before the first test runs). */
  readonly pages: DashboardPages;
  /** The element the test renders into, new for each test. */
  readonly root: FakeElement;
  /** The requests the pages made in this test, in order. */
  readonly requests: HeldRequest[];
  /** The live streams the pages opened in this test, in order. */
  readonly sources: FakeEventSource[];
  /** Runs `step` (a render, an action, an answer), lets the page apply what follows, and renders. */
  act(step: () => void): Promise<void>;
  /** Renders `element` into the root, as {@link act} does. */
  show(element: PageElement): Promise<void>;
  /** The request number `index`. @throws AssertionError when fewer were made. */
  request(index: number): HeldRequest;
  /** The requests whose URL (with its query) contains `part`, in order. */
  made(part: string): HeldRequest[];
  /** The texts of the alerts (errors) shown. */
  alerts(): string[];
}

/**
 * Registers, in the `describe` it is called in, the hooks of a page test: the bundle read once, and for each test a
 * new document, held `fetch` and `EventSource`, all put back (and the page unmounted) after it. → the harness, whose
 * fields are those of the running test.
 */
export function pageHarness(): PageHarness {
  let pages: DashboardPages | undefined;
  let state: { root: FakeElement; requests: HeldRequest[]; sources: FakeEventSource[] } | undefined;
  let cleanUp: () => void = () => undefined;
  const current = () => {
    if (pages === undefined || state === undefined) throw new Error('the page harness runs inside a test');
    return { pages, ...state };
  };
  before(async () => {
    pages = await dashboardPages();
  });
  beforeEach(() => {
    const dom = installDocument();
    const held = holdRequests();
    const streams = installEventSources();
    const root = dom.document.createElement('div');
    state = { root, requests: held.requests, sources: streams.sources };
    cleanUp = () => {
      pages?.render(null, root);
      streams.restore();
      held.restore();
      dom.restore();
    };
  });
  afterEach(() => cleanUp());
  const act = (step: () => void) =>
    current().pages.act(async () => {
      step();
      await settle();
    });
  return {
    get pages() {
      return current().pages;
    },
    get root() {
      return current().root;
    },
    get requests() {
      return current().requests;
    },
    get sources() {
      return current().sources;
    },
    act,
    show: (element) => act(() => current().pages.render(element, current().root)),
    request: (index) => {
      const { requests } = current();
      const held = requests[index];
      assert.ok(held, `request ${index} was made (${requests.length} were)`);
      return held;
    },
    made: (part) => current().requests.filter((r) => r.url.includes(part)),
    alerts: () =>
      current()
        .root.all((e) => e.getAttribute('role') === 'alert')
        .map((e) => e.textContent),
  };
}
