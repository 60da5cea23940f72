import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot, { type AlignedData, type Options } from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { api, duration } from '../api.ts';
import { messageOf, Notice, Section, useLatestRead } from '../ui.tsx';

/** One bucket of the server's health report (src/app/health.ts). */
interface Bucket {
  at: number;
  sent: number;
  received: number;
  attempts: number;
  failed: number;
  p50Ms: number | null;
  p99Ms: number | null;
}

/** The server's health report (docs/dashboard.md#health). */
interface Report {
  range: string;
  since: number;
  until: number;
  bucketMs: number;
  buckets: Bucket[];
  totals: { sent: number; received: number; attempts: number; failed: number; failureRate: number | null };
  latency: { p50Ms: number | null; p99Ms: number | null };
  sessions: { instanceId: string; changes: { at: number; status: string }[] }[];
}

const RANGES = [
  { value: '1h', label: 'last hour' },
  { value: '24h', label: 'last 24 hours' },
  { value: '7d', label: 'last 7 days' },
];

/** Statuses during which a session counts as up in the session chart. */
const UP = new Set(['connected', 'resumed', 'logged_in']);

/**
 * A time-series chart drawn by uPlot (a maintained chart library): `series` labels and colours for the columns of
 * `data` after the time axis (seconds). The canvas is described to assistive technology by `summary`.
 */
function Chart(props: {
  title: string;
  summary: string;
  data: AlignedData;
  series: { label: string; stroke: string; stepped?: boolean }[];
  yLabel: string;
}) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const element = box.current;
    if (!element) return;
    const width = Math.max(280, element.clientWidth);
    // Axes in the page's text colour and Pico's muted line colour, so the chart reads in light and dark alike.
    const style = getComputedStyle(element);
    const stroke = style.color;
    const line = {
      stroke: style.getPropertyValue('--pico-muted-border-color').trim() || '#d0d7de',
      width: 1,
    };
    const options: Options = {
      width,
      height: 180,
      axes: [
        { stroke, grid: line, ticks: line },
        { label: props.yLabel, size: 60, stroke, grid: line, ticks: line },
      ],
      series: [
        {},
        ...props.series.map((s) => ({
          label: s.label,
          stroke: s.stroke,
          width: 2,
          ...(s.stepped ? { paths: uPlot.paths.stepped?.({ align: 1 }) } : {}),
        })),
      ],
    };
    const chart = new uPlot(options, props.data, element);
    const resize = () => chart.setSize({ width: Math.max(280, element.clientWidth), height: 180 });
    window.addEventListener('resize', resize);
    return () => {
      window.removeEventListener('resize', resize);
      chart.destroy();
    };
  }, [props.data]);
  return (
    <figure class="chart">
      <figcaption>{props.title}</figcaption>
      <div ref={box} role="img" aria-label={props.summary} />
    </figure>
  );
}

/** `value` ms as text, or a dash. */
const ms = (value: number | null) => (value === null ? '—' : `${value} ms`);

/**
 * Health over time (docs/dashboard.md#health): for one instance (`instanceId`) or the whole organization, charts of
 * messages sent and received, webhook attempts and failures, attempt latency (p50 and p99), and each session's state,
 * over the last hour, day or week, with the window's totals in words. Read again when `version` changes; for another
 * instance, nothing is shown until it is read.
 */
export function HealthPanel(props: {
  instanceId?: string;
  names?: Record<string, string>;
  version?: number;
}) {
  const [range, setRange] = useState('24h');
  const [report, setReport] = useState<Report | null>(null);
  const [error, setError] = useState<string | null>(null);
  const path = props.instanceId ? `/instances/${props.instanceId}/health` : '/health';
  // Reads overlap (a push, or another period picked, while a read is on its way): only the latest started one is
  // shown, so the charts and totals are always those of the period and instance shown.
  const beginRead = useLatestRead();
  const shownPath = useRef(path);
  useEffect(() => {
    if (shownPath.current !== path) {
      // Another instance: its charts replace the previous one's once read, and none of the previous one's show meanwhile.
      shownPath.current = path;
      setReport(null);
      setError(null);
    }
    const latest = beginRead();
    api<Report>('GET', `${path}?range=${range}`)
      .then((value) => {
        if (!latest()) return;
        setReport(value);
        setError(null);
      })
      .catch((e) => {
        if (latest()) setError(messageOf(e));
      });
  }, [path, range, props.version]);

  const id = props.instanceId ? `health-range-${props.instanceId}` : 'health-range';
  return (
    <Section title={props.instanceId ? 'Health' : 'Organization health'}>
      <div class="row">
        <div>
          <label for={id}>Period</label>
          <select id={id} value={range} onChange={(e) => setRange(e.currentTarget.value)}>
            {RANGES.map((r) => (
              <option key={r.value} value={r.value}>
                {r.label}
              </option>
            ))}
          </select>
        </div>
      </div>
      <Notice error={error} />
      {report && <HealthCharts report={report} names={props.names ?? {}} />}
    </Section>
  );
}

function HealthCharts(props: { report: Report; names: Record<string, string> }) {
  const { report } = props;
  const times = report.buckets.map((b) => b.at / 1000);
  const rate = report.totals.failureRate;
  const span = duration((report.until - report.since) / 1000);
  const sessionSeries = report.sessions.map((session, index) => ({
    label: props.names[session.instanceId] ?? session.instanceId.slice(0, 8),
    stroke: ['#0a5bd3', '#116329', '#9a6700', '#8250df', '#b42318'][index % 5] ?? '#0a5bd3',
    stepped: true,
  }));
  const sessionData = report.sessions.map((session) =>
    report.buckets.map((bucket) => {
      const end = bucket.at + report.bucketMs;
      const last = session.changes.filter((change) => change.at < end).at(-1);
      return last !== undefined && UP.has(last.status) ? 1 : 0;
    }),
  );
  return (
    <>
      <p class="hint">
        Times on the charts are in your time zone ({Intl.DateTimeFormat().resolvedOptions().timeZone}).
      </p>
      <dl class="facts" data-health-totals>
        <dt>Messages sent</dt>
        <dd>{report.totals.sent}</dd>
        <dt>Messages received</dt>
        <dd>{report.totals.received}</dd>
        <dt>Webhook attempts</dt>
        <dd>
          {report.totals.attempts}
          {rate === null ? '' : `, ${report.totals.failed} failed (${(rate * 100).toFixed(1)} %)`}
        </dd>
        <dt>Attempt latency</dt>
        <dd>
          p50 {ms(report.latency.p50Ms)}, p99 {ms(report.latency.p99Ms)}
        </dd>
      </dl>
      <div class="charts">
        <Chart
          title="Messages"
          yLabel="messages"
          summary={`Messages over the last ${span}: ${report.totals.sent} sent, ${report.totals.received} received.`}
          data={[times, report.buckets.map((b) => b.sent), report.buckets.map((b) => b.received)]}
          series={[
            { label: 'sent', stroke: '#0a5bd3' },
            { label: 'received', stroke: '#116329' },
          ]}
        />
        <Chart
          title="Webhook deliveries"
          yLabel="attempts"
          summary={`Webhook attempts over the last ${span}: ${report.totals.attempts}, of which ${report.totals.failed} failed.`}
          data={[times, report.buckets.map((b) => b.attempts), report.buckets.map((b) => b.failed)]}
          series={[
            { label: 'attempts', stroke: '#0a5bd3' },
            { label: 'failed', stroke: '#b42318' },
          ]}
        />
        <Chart
          title="Delivery latency"
          yLabel="ms"
          summary={`Attempt latency over the last ${span}: p50 ${ms(report.latency.p50Ms)}, p99 ${ms(report.latency.p99Ms)}.`}
          data={[times, report.buckets.map((b) => b.p50Ms), report.buckets.map((b) => b.p99Ms)]}
          series={[
            { label: 'p50', stroke: '#116329' },
            { label: 'p99', stroke: '#9a6700' },
          ]}
        />
        {report.sessions.length > 0 && (
          <Chart
            title="Sessions (1 = connected)"
            yLabel="up"
            summary={`Session state over the last ${span}: ${report.sessions
              .map(
                (s) =>
                  `${props.names[s.instanceId] ?? s.instanceId.slice(0, 8)} ${s.changes.at(-1)?.status ?? 'no change'}`,
              )
              .join('; ')}.`}
            data={[times, ...sessionData]}
            series={sessionSeries}
          />
        )}
      </div>
    </>
  );
}
