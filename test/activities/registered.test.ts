import { describe, expect, it } from 'vitest';
import { createActivities, createActivitiesWithSteps } from '../../src/activities';
import { defaultServiceConfig } from '../../src/config/service-config';
import { lazyTempLedger } from '../helpers/ledger';

const deps = {
  config: defaultServiceConfig({ baseUrl: 'http://127.0.0.1:9/v1' }),
  apiKey: () => 'k',
  ledger: lazyTempLedger(),
};

describe('the activities the worker registers', () => {
  it('hold no single-request activity: those exist only for the tests that drive one request at a time', () => {
    const registered = Object.keys(createActivities(deps));
    const withSteps = Object.keys(createActivitiesWithSteps(deps));
    expect(registered).toContain('createImage');
    expect(registered).not.toEqual(expect.arrayContaining(['submitCreation']));
    expect(registered).not.toEqual(expect.arrayContaining(['pollCreation']));
    expect(registered).not.toEqual(expect.arrayContaining(['downloadImages']));
    expect(withSteps.filter((name) => !registered.includes(name)).sort()).toEqual([
      'downloadImages',
      'pollCreation',
      'submitCreation',
    ]);
  });
});
