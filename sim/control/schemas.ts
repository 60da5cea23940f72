/** TypeBox schemas shared by the control routes. */
import { Type } from '@sinclair/typebox';

/** A phone number as the control API takes it: digits only, 7 to 15, no leading zero (E.164 without "+"). */
export const Phone = Type.String({ pattern: '^[1-9][0-9]{6,14}$', description: 'E.164 digits without "+"' });
