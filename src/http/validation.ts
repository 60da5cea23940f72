/** One validator error as Fastify reports it (Ajv's ErrorObject with `verbose` on). */
export interface ValidationIssue {
  keyword: string;
  instancePath: string;
  params: Record<string, unknown>;
  message?: string;
  parentSchema?: Record<string, unknown>;
  data?: unknown;
}

function fieldPath(instancePath: string, context: string): string {
  const parts = instancePath.split('/').filter((p) => p !== '');
  if (parts.length === 0) return context === 'body' ? 'request body' : context;
  return parts
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((path, part) => (/^\d+$/.test(part) ? `${path}[${part}]` : path ? `${path}.${part}` : part), '');
}

function article(type: string): string {
  switch (type) {
    case 'array':
      return 'an array';
    case 'object':
      return 'a JSON object';
    case 'integer':
      return 'an integer';
    default:
      return `a ${type}`;
  }
}

function show(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/**
 * Turns the first validator error into a message naming the field and the rule
 * (docs/decisions/0001-envelope-and-error-codes.md), e.g. `phone is required`, `name must be at most 25 characters`.
 * A schema's `x-message` template wins.
 * @param context where the error is: `body`, `querystring`, `params` or `headers`.
 */
export function validationMessage(issue: ValidationIssue, context: string): string {
  const { keyword, params, parentSchema } = issue;
  if (keyword === 'required') {
    const missing = String(params.missingProperty ?? '');
    const base = fieldPath(issue.instancePath, context);
    const field = base === 'request body' || base === context ? missing : `${base}.${missing}`;
    return `${field} is required`;
  }
  const field = fieldPath(issue.instancePath, context);
  const template = parentSchema?.['x-message'];
  // A template states the field's whole rule (type included), e.g. "latitude must be a number from -90 to 90".
  if (typeof template === 'string') {
    const parent = field.replace(/\[\d+\]$/, '');
    return template
      .replaceAll('{field}', field)
      .replaceAll('{parent}', parent)
      .replaceAll('{value}', show(issue.data));
  }
  switch (keyword) {
    case 'type':
      if (field === 'request body') return 'request body must be a JSON object';
      return `${field} must be ${article(String(params.type))}`;
    case 'maxLength':
      return `${field} must be at most ${String(params.limit)} characters`;
    case 'minLength':
      return Number(params.limit) === 1
        ? `${field} must not be empty`
        : `${field} must be at least ${String(params.limit)} characters`;
    case 'maxItems':
      return `${field} must have at most ${String(params.limit)} items`;
    case 'minItems':
      return `${field} must have at least ${String(params.limit)} item${Number(params.limit) === 1 ? '' : 's'}`;
    case 'minimum':
    case 'maximum':
    case 'exclusiveMinimum':
    case 'exclusiveMaximum':
      return `${field} must be ${String(params.comparison)} ${String(params.limit)}`;
    case 'enum':
      return `${field} must be one of ${(params.allowedValues as unknown[] | undefined)?.map(show).join(', ') ?? ''}`;
    case 'const':
      return `${field} must be ${show(params.allowedValue)}`;
    case 'format':
      return `${field} must be a valid ${String(params.format)}`;
    case 'pattern':
      return `${field} has an invalid format`;
    case 'additionalProperties':
      return `${field} has an unknown field ${String(params.additionalProperty)}`;
    default:
      return `${field} is invalid${issue.message ? `: ${issue.message}` : ''}`;
  }
}
