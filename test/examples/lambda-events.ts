/**
 * Lambda events as AWS sends them to a function behind API Gateway or a function URL
 * (shapes from the AWS documentation's examples: REST API proxy integration, payload
 * format 1.0; HTTP API, payload format 2.0; function URL, which uses 2.0).
 */
import { randomUUID } from 'node:crypto';

export interface Request {
  body: string | Uint8Array;
  headers: Record<string, string>;
}

const encode = (body: string | Uint8Array, base64: boolean) =>
  base64 ? Buffer.from(body).toString('base64') : String(body);
const now = () => new Date();

/** REST API (API Gateway v1), proxy integration. Header names keep the sender's case. */
export function restApiEvent({ body, headers }: Request, base64: boolean): object {
  const all: Record<string, string> = {
    Host: 'a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com',
    'User-Agent': 'gateway-webhooks/1.0',
    'X-Amzn-Trace-Id': `Root=1-${Math.floor(Date.now() / 1000).toString(16)}-${randomUUID().replace(/-/g, '').slice(0, 24)}`,
    'X-Forwarded-For': '203.0.113.7',
    'X-Forwarded-Port': '443',
    'X-Forwarded-Proto': 'https',
    ...headers,
  };
  return {
    resource: '/webhooks/gateway',
    path: '/webhooks/gateway',
    httpMethod: 'POST',
    headers: all,
    multiValueHeaders: Object.fromEntries(Object.entries(all).map(([k, v]) => [k, [v]])),
    queryStringParameters: null,
    multiValueQueryStringParameters: null,
    pathParameters: null,
    stageVariables: null,
    requestContext: {
      accountId: '123456789012',
      apiId: 'a1b2c3d4e5',
      domainName: 'a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com',
      domainPrefix: 'a1b2c3d4e5',
      extendedRequestId: 'LgB3AFiZDoEEMtQ=',
      httpMethod: 'POST',
      identity: {
        accessKey: null,
        accountId: null,
        caller: null,
        cognitoIdentityId: null,
        sourceIp: '203.0.113.7',
        user: null,
        userAgent: 'gateway-webhooks/1.0',
        userArn: null,
      },
      path: '/prod/webhooks/gateway',
      protocol: 'HTTP/1.1',
      requestId: randomUUID(),
      requestTime: now().toUTCString(),
      requestTimeEpoch: Date.now(),
      resourceId: 'x1y2z3',
      resourcePath: '/webhooks/gateway',
      stage: 'prod',
    },
    body: encode(body, base64),
    isBase64Encoded: base64,
  };
}

/** HTTP API (API Gateway v2, payload 2.0), or a function URL (`url`): header names in lower case. */
export function httpApiEvent({ body, headers }: Request, base64: boolean, url = false): object {
  const domain = url
    ? 'abcdefghijklmnopqrstuvwxyz0123.lambda-url.eu-west-1.on.aws'
    : 'a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com';
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  return {
    version: '2.0',
    routeKey: url ? '$default' : 'POST /webhooks/gateway',
    rawPath: '/webhooks/gateway',
    rawQueryString: '',
    headers: {
      'content-length': String(typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength),
      host: domain,
      'user-agent': 'gateway-webhooks/1.0',
      'x-amzn-trace-id': `Root=1-${Math.floor(Date.now() / 1000).toString(16)}-${randomUUID().replace(/-/g, '').slice(0, 24)}`,
      'x-forwarded-for': '203.0.113.7',
      'x-forwarded-port': '443',
      'x-forwarded-proto': 'https',
      ...lower,
    },
    requestContext: {
      accountId: url ? 'anonymous' : '123456789012',
      apiId: url ? 'abcdefghijklmnopqrstuvwxyz0123' : 'a1b2c3d4e5',
      domainName: domain,
      domainPrefix: domain.split('.')[0],
      http: {
        method: 'POST',
        path: '/webhooks/gateway',
        protocol: 'HTTP/1.1',
        sourceIp: '203.0.113.7',
        userAgent: 'gateway-webhooks/1.0',
      },
      requestId: randomUUID(),
      routeKey: url ? '$default' : 'POST /webhooks/gateway',
      stage: '$default',
      time: now().toUTCString(),
      timeEpoch: Date.now(),
    },
    body: encode(body, base64),
    isBase64Encoded: base64,
  };
}
