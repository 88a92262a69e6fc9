/** A gateway-shaped payload as the senders write it (float tokens such as 1.0 kept). */
export function examplePayload(options: { status?: 'success' | 'fail'; jobId?: string } = {}): string {
  const jobId = options.jobId ?? globalThis.crypto.randomUUID();
  const now = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
  const head =
    `{"event":"async_job_completed","job_id":${JSON.stringify(jobId)},"status":"${options.status ?? 'success'}",` +
    `"feature":"ocr","subfeature":"ocr","provider":"example","model":null,"created_at":"${now}","finished_at":"${now}",`;
  if (options.status === 'fail') return head + '"error":{"message":"provider timeout"}}';
  return (
    head +
    '"output":{"text":"Grüße","confidence":1.0,"pages":[{"page":1,"box":{"x":0.0,"y":0.5,"w":12.25,"h":1e-7}}]}}'
  );
}
