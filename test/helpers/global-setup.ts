// Filled in by the store suites (servers are started here once per run).
export default async function setup(): Promise<void> {}
