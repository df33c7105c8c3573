import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
try { console.log(historyFromJSON({ events: [{ eventId: '1', eventType: 'WorkflowExecutionStarted', workflowExecutionStartedEventAttributes: { workflowType: { name: 'x' } } }] })); } catch (e) { console.log('fromJSON error', e); }
